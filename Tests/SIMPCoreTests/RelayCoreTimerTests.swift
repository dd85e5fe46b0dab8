import NIOCore
import SIMPCore
import SIMPCoreTestKit
import XCTest

/// The relay core's time-driven decisions (`tick`, `nextDeadline`): heartbeats, registration
/// refreshes, the shutdown drain, and the shutdown itself.
final class RelayCoreTimerTests: XCTestCase {
    private let t0 = DevRelay.t0
    private let c1 = ConnectionID(1), c2 = ConnectionID(2), c3 = ConnectionID(3)
    private let heartbeat = HeartbeatPolicy(interval: .seconds(1), missLimit: 3)

    private func ping(_ id: UInt64) -> SIMPMessage { SIMPMessage(kind: .ping, messageId: id) }

    func testPingsGoToConnectionsThatAreDue() throws {
        var relay = DevRelay { $0.heartbeat = self.heartbeat }
        try relay.connect("alice", on: c1, port: 5001)
        XCTAssertEqual(relay.open(c2, now: t0 + .milliseconds(500)), [])
        XCTAssertEqual(relay.core.nextDeadline, t0 + .milliseconds(250), "heartbeats are checked four times per interval")
        XCTAssertEqual(relay.tick(now: t0 + .milliseconds(250)), [])
        XCTAssertEqual(relay.tick(now: t0 + .seconds(1)), [.send(c1, ping(1))])
        XCTAssertEqual(relay.tick(now: t0 + .milliseconds(1500)), [.send(c2, ping(2))])
        XCTAssertEqual(relay.tick(now: t0 + .milliseconds(1600)), [], "not checked again before the check period")
        XCTAssertEqual(relay.core.nextDeadline, t0 + .milliseconds(1750))
    }

    func testASilentConnectionIsDroppedOnceAndCountedOnce() throws {
        var relay = DevRelay { $0.heartbeat = self.heartbeat }
        try relay.connect("alice", on: c1, port: 5001)
        try relay.connect("bob", on: c2, port: 5002)
        XCTAssertEqual(relay.tick(now: t0 + .seconds(1)), [.send(c1, ping(1)), .send(c2, ping(2))])
        XCTAssertEqual(relay.tick(now: t0 + .seconds(2)), [.send(c1, ping(3)), .send(c2, ping(4))])
        XCTAssertEqual(relay.control(SIMPMessage(kind: .pong, messageId: 4), on: c2, now: t0 + .milliseconds(2500)), [])

        XCTAssertEqual(
            relay.tick(now: t0 + .seconds(3)),
            [
                .event(.userDisconnected(relay.registration(of: "alice"), .silent)),
                .store(.unregister(user: "alice", session: "r1/1")), .store(.recordPresence(user: "alice", online: false)),
                .reject(.heartbeatTimeout, detail: "c1 silent for \(heartbeat.deadAfter)"), .close(c1),
            ],
            "alice said nothing for three intervals; bob answered half an interval ago, so he is not pinged")
        XCTAssertFalse(relay.core.isConnected("alice"))
        XCTAssertTrue(relay.core.isConnected("bob"))
        XCTAssertEqual(relay.tick(now: t0 + .milliseconds(3250)), [], "counted once, however long the close takes")
        XCTAssertEqual(relay.tick(now: t0 + .milliseconds(3500)), [.send(c2, ping(5))], "bob silent for an interval")
        XCTAssertEqual(relay.closed(c1), [], "the shell's close adds nothing")
    }

    /// The relay renews its liveness record every tenth of the refresh interval, one request
    /// whatever its sessions: an idle session costs the store nothing. Its registrations are
    /// written again only when the store had lost the record (a new incarnation) and at the
    /// periodic sweep.
    func testOnlyTheRelaysRecordIsRenewedUntilTheStoreLostItOrTheSweepIsDue() throws {
        var relay = DevRelay {
            $0.heartbeat = HeartbeatPolicy(interval: .seconds(600))
            $0.registrationSweepInterval = .seconds(60)
        }
        XCTAssertEqual(relay.tick(now: t0 + .seconds(30)), [], "nothing to renew before the relay listens")
        let start = t0 + .seconds(30)
        let renewal = RelayAction.store(.refresh(relayId: "r1", description: "udp 7100", []))
        XCTAssertEqual(
            relay.run { $0.listening(udpPort: 7100, description: "udp 7100", now: start, into: &$1) }, [renewal],
            "the relay announces itself at once")
        try relay.connect("alice", on: c1, port: 5001, now: start)
        try relay.connect("bob", on: c2, port: 5002, now: start)
        XCTAssertEqual(relay.connected("alice").udpPort, 7100, "CONNECTED names the bound port")
        let step = TimeAmount.nanoseconds(relay.core.configuration.refreshInterval.nanoseconds / 10)
        let registrations = [relay.registration("alice", on: c1, port: 5001), relay.registration("bob", on: c2, port: 5002)]
        XCTAssertEqual(relay.tick(now: start + step - .nanoseconds(1)), [])
        for index in 1...20 {
            XCTAssertEqual(relay.tick(now: start + step * index), [renewal], "tick \(index): the record alone")
        }
        XCTAssertEqual(relay.answer(.refresh(relayRecordWasMissing: false), now: start), [])
        XCTAssertEqual(relay.tick(now: start + step * 21), [renewal], "the record was there: nothing to write again")

        XCTAssertEqual(relay.answer(.refresh(relayRecordWasMissing: true), now: start), [])
        XCTAssertEqual(
            relay.tick(now: start + step * 22), [.store(.refresh(relayId: "r1", description: "udp 7100", registrations))],
            "the store lost the record: every registration is written again with the new incarnation")
        XCTAssertEqual(relay.tick(now: start + step * 23), [renewal], "once")

        var early: [RelayAction] = []
        for index in 24..<60 { early += relay.tick(now: start + step * index).filter { $0 != renewal } }
        XCTAssertEqual(early, [], "nothing more until the sweep is due")
        XCTAssertEqual(
            relay.tick(now: start + .seconds(60)), [.store(.refresh(relayId: "r1", description: "udp 7100", registrations))],
            "the hourly sweep (a minute here) writes every registration again")
    }

    /// Each connection is pinged when its own interval is up, between the periodic checks:
    /// many connections' pings are spread over the interval, not sent together at a check.
    func testEachConnectionIsPingedAtItsOwnTime() throws {
        var relay = DevRelay { $0.heartbeat = self.heartbeat }
        try relay.connect("alice", on: c1, port: 5001, now: t0 + .milliseconds(100))
        XCTAssertEqual(relay.core.nextDeadline, t0 + .milliseconds(250), "the periodic check comes first")
        XCTAssertEqual(relay.tick(now: t0 + .milliseconds(250)), [])
        XCTAssertEqual(relay.core.nextDeadline, t0 + .milliseconds(500))
        XCTAssertEqual(relay.tick(now: t0 + .seconds(1)), [])
        XCTAssertEqual(relay.core.nextDeadline, t0 + .milliseconds(1100), "alice's interval ends before the next check")
        XCTAssertEqual(relay.tick(now: t0 + .milliseconds(1100)), [.send(c1, ping(1))])
    }

    private let suspicious = HeartbeatPolicy(interval: .seconds(60), missLimit: 2, suspectAfter: .seconds(5), answerWithin: .seconds(10))

    private func isPing(_ action: RelayAction) -> Bool {
        guard case .send(_, let message) = action else { return false }
        return message.kind == .ping
    }

    /// A receiver silent for `suspectAfter` that content is forwarded to is pinged with the
    /// forward, and given up `answerWithin` later if it stays silent, long before its idle
    /// interval (a minute here) would notice; messages to it are stored from then on. Failed
    /// before: the relay pinged only on the interval.
    func testContentForwardedToASilentReceiverPingsItAndGivesItUpUnlessItAnswers() throws {
        var relay = DevRelay { $0.heartbeat = self.suspicious }
        try relay.connect("alice", on: c1, port: 5001)
        try relay.connect("bob", on: c2, port: 5002)
        XCTAssertFalse(relay.send(textMessage(1, from: "alice", to: "bob"), now: t0 + .seconds(2)).contains(where: isPing), "bob connected 2 s ago")
        XCTAssertTrue(relay.send(textMessage(2, from: "alice", to: "bob"), now: t0 + .seconds(6)).contains(.send(c2, ping(1))), "bob silent for 6 s")
        XCTAssertFalse(relay.send(textMessage(3, from: "alice", to: "bob"), now: t0 + .seconds(7)).contains(where: isPing), "one suspicion at a time")
        XCTAssertEqual(relay.tick(now: t0 + .milliseconds(15_900)).filter { if case .close = $0 { true } else { false } }, [])

        let givenUp = relay.tick(now: t0 + .seconds(16))
        XCTAssertTrue(givenUp.contains(.reject(.heartbeatTimeout, detail: "c2 silent for \(TimeAmount.seconds(16))")), "\(givenUp)")
        XCTAssertTrue(givenUp.contains(.close(c2)))
        XCTAssertFalse(relay.core.isConnected("bob"))
        XCTAssertTrue(relay.core.isConnected("alice"), "alice's datagrams are liveness: she is not suspected")
    }

    /// A suspected receiver that answers is kept, and pinged next on its interval.
    func testASuspectedReceiverThatAnswersIsKept() throws {
        var relay = DevRelay { $0.heartbeat = self.suspicious }
        try relay.connect("alice", on: c1, port: 5001)
        try relay.connect("bob", on: c2, port: 5002)
        XCTAssertTrue(relay.send(textMessage(1, from: "alice", to: "bob"), now: t0 + .seconds(6)).contains(.send(c2, ping(1))))
        XCTAssertEqual(relay.control(SIMPMessage(kind: .pong, messageId: 1), on: c2, now: t0 + .seconds(7)), [])
        XCTAssertEqual(relay.tick(now: t0 + .seconds(16)), [])
        XCTAssertTrue(relay.core.isConnected("bob"))
        XCTAssertEqual(relay.tick(now: t0 + .seconds(60)), [], "alice was heard at 6 s, bob at 7 s")
        XCTAssertEqual(relay.tick(now: t0 + .seconds(67)), [.send(c1, ping(2)), .send(c2, ping(3))], "each an interval after it was last heard")
    }

    /// Any authentic datagram of a session (here the client's keepalive HELLO) is liveness of
    /// its client: it is not pinged. Failed before: only control frames counted.
    func testASessionsDatagramsCountAsLiveness() throws {
        var relay = DevRelay { $0.heartbeat = self.heartbeat }
        try relay.connect("alice", on: c1, port: 5001)
        try relay.connect("bob", on: c2, port: 5002)
        _ = relay.send(SIMPMessage(kind: .hello, fromUser: "alice"), now: t0 + .milliseconds(900))
        XCTAssertEqual(relay.tick(now: t0 + .seconds(1)), [.send(c2, ping(1))], "alice's HELLO came 100 ms ago")
    }

    func testTheDrainEndsOnceNoReceiptCameForTheQuietPeriod() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: c1, port: 5001)
        try relay.connect("bob", on: c2, port: 5002)
        XCTAssertEqual(relay.run { $0.beginDrain(now: t0, into: &$1) }, [])
        XCTAssertTrue(relay.core.isDraining)
        let bytes = relay.sealed(textMessage(1, from: "alice", to: "bob"))
        XCTAssertEqual(
            relay.datagram(bytes, from: address("127.0.0.1", 5001)),
            [.reject(.draining, detail: "datagram of \(bytes.readableBytes) bytes while shutting down")], "its sender retransmits elsewhere")

        let receipt = SIMPMessage(kind: .receipt, messageId: 7, fromUser: "bob", toUser: "alice")
        XCTAssertEqual(relay.control(receipt, on: c2, now: t0 + .milliseconds(300)), [.send(c1, receipt)], "receipts are still routed")
        let quiet = relay.core.configuration.drainQuietPeriod
        XCTAssertEqual(relay.core.nextDeadline, t0 + .milliseconds(300) + quiet)
        XCTAssertEqual(relay.tick(now: t0 + .milliseconds(300) + quiet - .nanoseconds(1)), [])
        XCTAssertEqual(relay.tick(now: t0 + .milliseconds(300) + quiet), [.drained])
        XCTAssertEqual(relay.tick(now: t0 + .seconds(2)), [], "drained once")
    }

    func testReceiptsFromOtherRelaysAndStoredReceiptsKeepTheDrainOpen() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: c1, port: 5001)
        XCTAssertEqual(relay.run { $0.beginDrain(now: t0, into: &$1) }, [])
        let quiet = relay.core.configuration.drainQuietPeriod
        let receipt = SIMPMessage(kind: .receipt, messageId: 3, fromUser: "dave", toUser: "alice")
        XCTAssertEqual(
            relay.relayDelivery(RelayDelivery(user: "alice", payload: .control(receipt)), now: t0 + .milliseconds(400)), [.send(c1, receipt)])
        XCTAssertEqual(relay.tick(now: t0 + quiet), [], "a receipt from another relay was routed 100 ms ago")
        let entry = InboxEntry(message: textMessage(4, from: "alice", to: "erin"), storedAt: 1)
        XCTAssertEqual(
            relay.answer(
                .storeInInbox(user: "erin", message: entry.message, entry, InboxStoreResult(duplicate: false)), now: t0 + .milliseconds(800)),
            [
                .event(.inboxStored(InboxStored(user: "erin", from: "alice", messageId: 4, kind: .text))),
                .send(c1, statusReceipt(4, from: "erin", to: "alice", .stored)), .store(.lookup(user: "erin")),
            ])
        XCTAssertEqual(relay.tick(now: t0 + .milliseconds(800) + quiet - .nanoseconds(1)), [], "a STORED receipt was routed")
        XCTAssertEqual(relay.tick(now: t0 + .milliseconds(800) + quiet), [.drained])
    }

    func testTheDrainEndsAtOnceWithoutConnectionsAndAtItsTimeoutOtherwise() throws {
        var empty = DevRelay()
        XCTAssertEqual(empty.run { $0.beginDrain(now: t0, into: &$1) }, [.drained], "at once: no tick needed")
        XCTAssertEqual(empty.tick(now: t0), [], "drained once")

        var busy = DevRelay {
            $0.drainTimeout = .seconds(2)
            $0.drainQuietPeriod = .seconds(60)
        }
        try busy.connect("alice", on: c1, port: 5001)
        XCTAssertEqual(busy.run { $0.beginDrain(now: t0, into: &$1) }, [])
        XCTAssertEqual(busy.core.nextDeadline, t0 + .seconds(1), "the next heartbeat check comes first")
        XCTAssertEqual(busy.tick(now: t0 + .seconds(1)), [])
        XCTAssertEqual(busy.core.nextDeadline, t0 + .seconds(2))
        XCTAssertEqual(busy.tick(now: t0 + .seconds(2) - .nanoseconds(1)), [])
        XCTAssertEqual(busy.tick(now: t0 + .seconds(2)), [.drained])
    }

    func testShutDownWithdrawsEveryRegistrationInOneRequestAndClosesEveryConnection() throws {
        var relay = DevRelay()
        _ = relay.run { $0.listening(udpPort: 7000, description: "udp 7000", now: DevRelay.t0, into: &$1) }
        try relay.connect("bob", on: c2, port: 5002)
        try relay.connect("alice", on: c1, port: 5001)
        XCTAssertEqual(relay.open(c3), [], "a connection without a session")
        let registrations = [relay.registration("alice", on: c1, port: 5001), relay.registration("bob", on: c2, port: 5002)]

        XCTAssertEqual(
            relay.run { $0.shutDown(now: t0, into: &$1) },
            [
                .event(.userDisconnected(registrations[0], .relayStopped)), .close(c1),
                .event(.userDisconnected(registrations[1], .relayStopped)), .close(c2), .close(c3),
                .store(.withdraw(relayId: "r1", registrations)),
            ])
        XCTAssertEqual(relay.core.connectedUsers, 0)
        for connection in [c1, c2, c3] {
            XCTAssertEqual(relay.closed(connection), [], "no unregister per session: the withdraw covers them")
        }
        XCTAssertEqual(relay.tick(now: t0 + .seconds(60)), [], "no refresh after the shutdown")
    }
}
