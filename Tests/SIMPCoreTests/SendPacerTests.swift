import NIOCore
import SIMPCore
import SIMPCoreTestKit
import XCTest

/// Pacing: a client keeps its content transmissions under the relay's per-user rate limit, so a
/// backlog (after an outage) is sent as fast as the relay admits it instead of being refused.
final class SendPacerTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    private func text(_ number: Int = 0) -> SIMPMessage {
        SIMPMessage(kind: .text, fromUser: "alice", toUser: "bob", content: "m\(number)")
    }

    func testABurstGoesOutAtThePacedRateAndNothingFails() {
        var sender = ReliableSender(firstMessageId: 1, pacing: RateLimit(perSecond: 10, burst: 5))
        var sent = 0
        for number in 1...20 { sent += sender.submit(text(number), now: t0).output.transmit.count }
        XCTAssertEqual(sent, 5, "the burst")
        XCTAssertEqual(sender.waitingCount, 15)

        let next = sender.nextDeadline!
        XCTAssertEqual(Double((next - t0).nanoseconds) / 1e6, 100, accuracy: 0.1, "the next token, 1/10 s later")
        let output = sender.poll(now: next)
        XCTAssertEqual(output.transmit.count, 1)
        XCTAssertEqual(output.events, [])
        XCTAssertGreaterThan(sender.nextDeadline!, next, "no deadline in the past (no spin)")
    }

    func testARefusalSlowsThePacerAndTheRefusedMessageIsSentAgainFirst() {
        var sender = ReliableSender(firstMessageId: 1, pacing: RateLimit(perSecond: 100, burst: 2))
        let first = sender.submit(text(1), now: t0).messageId
        _ = sender.submit(text(2), now: t0)
        _ = sender.submit(text(3), now: t0) // waits for a token

        sender.rateLimited(messageId: first, retryAfter: .milliseconds(50), now: t0 + .milliseconds(1))
        XCTAssertEqual(sender.pacer?.rate, 50, "halved")
        XCTAssertEqual(sender.pacer?.refusals, 1)
        let quiet = sender.poll(now: t0 + .milliseconds(40))
        XCTAssertEqual(quiet.transmit, [], "nothing before the relay's retryAfter")

        var resent: [SIMPMessage] = []
        while resent.count < 2, let deadline = sender.nextDeadline, deadline < t0 + .seconds(1) {
            resent += sender.poll(now: deadline).transmit
        }
        XCTAssertEqual(resent.map(\.messageId), [first, first + 2], "the refused message again, then the waiting one")
        XCTAssertEqual(resent.first?.attempt, 2)
        XCTAssertGreaterThanOrEqual(sender.nextDeadline ?? .distantFuture, t0 + .milliseconds(51))
    }

    func testRetransmissionsTakeTokensBeforeNewMessages() {
        var policy = RetransmitPolicy()
        policy.retransmissionCopies = 1
        var sender = ReliableSender(firstMessageId: 1, policy: policy, pacing: RateLimit(perSecond: 10, burst: 1))
        let first = sender.submit(text(1), now: t0).messageId
        _ = sender.submit(text(2), now: t0) // no token left: waits
        let retransmitAt = t0 + .seconds(1) // the initial RTO; a token came back meanwhile
        let output = sender.poll(now: retransmitAt)
        XCTAssertEqual(output.transmit.map(\.messageId), [first], "the retransmission has the token, the new message waits")
    }

    /// A model of story 6: a message every 5 ms, a 12 s outage of the uplink, a relay that
    /// charges each message id once at 500/s (burst 1,000) like `RelayCore`. With the client's
    /// default pacing the relay refuses nothing; unpaced, it refuses thousands of transmissions.
    func testAfterAnOutageThePacedBacklogIsNeverRefusedByTheRelay() {
        let paced = outage(pacing: ClientSession.defaultPacing)
        XCTAssertEqual(paced.refused, 0)
        XCTAssertEqual(paced.delivered, 3200)
        let unpaced = outage(pacing: nil)
        XCTAssertEqual(unpaced.delivered, 3200)
        XCTAssertGreaterThan(unpaced.refused, 500, "the model does exercise the limit")
        print("outage model: relay refusals paced \(paced.refused), unpaced \(unpaced.refused)")
    }

    /// Runs the outage model in 1 ms steps; returns the relay's refusals and the receipts.
    private func outage(pacing: RateLimit?) -> (refused: Int, delivered: Int) {
        var sender = ReliableSender(firstMessageId: 1, pacing: pacing)
        var relay = MessageRateLimiter<String>(RateLimit(perSecond: 500, burst: 1000))
        var arriving: [Int: [SIMPMessage]] = [:], receipts: [Int: [SIMPMessage]] = [:]
        var refused = 0, delivered = 0, submitted = 0
        let oneWay = 10, outage = 2000..<14_000
        for ms in 0..<60_000 {
            let now = t0 + .milliseconds(Int64(ms))
            var transmit: [SIMPMessage] = []
            for message in arriving.removeValue(forKey: ms) ?? [] {
                guard relay.admit("alice", messageId: message.messageId, now: now) == nil else {
                    refused += 1
                    continue
                }
                receipts[ms + 2 * oneWay, default: []].append(message.receipt(holdMicros: 0))
            }
            for receipt in receipts.removeValue(forKey: ms) ?? [] {
                let output = sender.handleReceipt(receipt, now: now)
                delivered += output.events.count
                transmit += output.transmit
            }
            if ms % 5 == 0, submitted < 3200 {
                transmit += sender.submit(text(submitted), now: now).output.transmit
                submitted += 1
            }
            if let deadline = sender.nextDeadline, deadline <= now { transmit += sender.poll(now: now).transmit }
            if !outage.contains(ms) { arriving[ms + oneWay, default: []] += transmit }
        }
        return (refused, delivered)
    }
}

/// Pacing from the relay's announced rate: CONNECTED's `messageRateLimit` (docs/PROTOCOL.md
/// §4.2) sets the client's pace to 90 % of it; a relay that does not announce one gets the
/// default pace.
final class AnnouncedPacingTests: XCTestCase {
    private let t0 = DevRelay.t0

    func testThePaceIsNinetyPercentOfTheAnnouncedRateWithABurstOfANinthOfASecondAtMostAHundred() {
        XCTAssertEqual(SendPacer.limit(announced: 0, otherwise: ClientSession.defaultPacing), ClientSession.defaultPacing, "nothing announced")
        XCTAssertEqual(
            SendPacer.limit(announced: 500, otherwise: RateLimit(perSecond: 1, burst: 1)), ClientSession.defaultPacing,
            "the relay's default gives the client's default")
        XCTAssertEqual(SendPacer.limit(announced: 100, otherwise: ClientSession.defaultPacing), RateLimit(perSecond: 90, burst: 10))
        XCTAssertEqual(SendPacer.limit(announced: 5000, otherwise: ClientSession.defaultPacing), RateLimit(perSecond: 4500, burst: 100))
        XCTAssertEqual(SendPacer.limit(announced: 1, otherwise: ClientSession.defaultPacing), RateLimit(perSecond: 0.9, burst: 1))
    }

    func testTheRelayAnnouncesItsPerUserRateAndTheClientPacesUnderIt() {
        let (connected, client) = login(relayRate: 5000)
        XCTAssertEqual(connected.messageRateLimit, 5000)
        XCTAssertEqual(client.sender.pacer?.limit, RateLimit(perSecond: 4500, burst: 100))
        let (defaultConnected, defaultClient) = login(relayRate: nil)
        XCTAssertEqual(defaultConnected.messageRateLimit, 500, "the default limit is announced too")
        XCTAssertEqual(defaultClient.sender.pacer?.limit, ClientSession.defaultPacing)
    }

    func testARelayThatAnnouncesNothingGetsTheConfiguredPace() {
        var configuration = ClientSession.Configuration(user: "alice", firstMessageId: 1)
        configuration.pacing = RateLimit(perSecond: 200, burst: 20)
        let (_, client) = login(relayRate: 5000, client: configuration, olderRelay: true)
        XCTAssertEqual(client.sender.pacer?.limit, RateLimit(perSecond: 200, burst: 20))
        configuration.pacing = nil
        let (_, unpaced) = login(relayRate: 5000, client: configuration)
        XCTAssertNil(unpaced.sender.pacer, "a client configured unpaced stays unpaced")
    }

    /// 2,000 messages submitted at once: under a relay announcing 5,000/s they are all sent
    /// within half a second; under the default relay it takes over four.
    func testABacklogGoesOutAtTheAnnouncedPace() {
        XCTAssertLessThan(secondsToSend(2000, relayRate: 5000), 0.5)
        XCTAssertGreaterThan(secondsToSend(2000, relayRate: nil), 4)
    }

    /// How long (virtual time) `count` messages submitted at once take to be transmitted.
    private func secondsToSend(_ count: Int, relayRate: Double?) -> Double {
        var configuration = ClientSession.Configuration(user: "alice", firstMessageId: 1)
        configuration.retransmit.maxIdSpan = UInt64(count) * 2 // only the pacer holds messages back
        // No receipts come: no retransmission within the measurement either.
        (configuration.retransmit.initialRTO, configuration.retransmit.maximumRTO) = (.seconds(60), .seconds(60))
        var (_, client) = login(relayRate: relayRate, client: configuration)
        var sent = 0, now = t0
        for number in 1...count {
            sent += client.submit(SIMPMessage(kind: .text, toUser: "bob", content: "m\(number)"), now: now).output.datagrams.count
        }
        while sent < count, let deadline = client.nextDeadline, deadline < t0 + .seconds(60) {
            now = max(now, deadline)
            sent += client.poll(now: now).datagrams.filter { $0.kind.isContent && $0.attempt == 1 }.count
        }
        XCTAssertEqual(sent, count)
        return Double((now - t0).nanoseconds) / 1e9
    }

    /// Logs a `ClientSession` in to a development `RelayCore` whose per-user limit is
    /// `relayRate` (nil: the default); `olderRelay` removes the announced rate from CONNECTED
    /// before the client sees it. Returns the CONNECTED the relay sent and the client.
    private func login(
        relayRate: Double?, client configuration: ClientSession.Configuration = .init(user: "alice", firstMessageId: 1),
        olderRelay: Bool = false
    ) -> (connected: SIMPMessage, client: ClientSession) {
        var relay = DevRelay { if let relayRate { $0.messageLimit = RelayCore.Configuration.defaultMessageLimit.scaled(toPerSecond: relayRate) } }
        var client = ClientSession(configuration: configuration)
        let connection = ConnectionID(1)
        _ = relay.open(connection)
        var frames = [client.beginLogin(udpPort: 5000)]
        var connected = SIMPMessage(kind: .connected)
        while let frame = frames.popLast() {
            var actions = relay.control(frame, on: connection)
            for case .store(let request) in actions where request.registration != nil {
                actions += relay.answer(DevRelay.done(request))
            }
            for case .send(_, var message) in actions {
                if message.kind == .connected {
                    connected = message
                    if olderRelay { message.messageRateLimit = 0 }
                }
                if case .send(let next)? = client.loginReceived(message, now: t0) { frames.append(next) }
            }
        }
        XCTAssertTrue(client.isRegistered)
        return (connected, client)
    }
}
