import NIOCore
import SIMPCore
import XCTest

/// The client's wiring of the core, with a virtual clock.
final class ClientSessionTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
    private let keys = SessionKeys(sessionId: 42, secret: Array(repeating: 7, count: 32))

    private func session(reconnect: ReconnectPolicy? = ReconnectPolicy()) -> ClientSession {
        var configuration = ClientSession.Configuration(user: "alice", firstMessageId: 100)
        configuration.heartbeat = HeartbeatPolicy(interval: .seconds(5), missLimit: 3)
        configuration.keepaliveInterval = .seconds(10)
        configuration.reconnect = reconnect
        return ClientSession(configuration: configuration)
    }

    func testNothingIsSentBeforeRegistrationThenEverythingIs() {
        var client = session()
        let early = client.submit(SIMPMessage(kind: .text, toUser: "bob", content: "early"), now: t0)
        XCTAssertTrue(early.output.datagrams.isEmpty)
        XCTAssertEqual(client.nextDeadline, t0 + RetransmitPolicy().delayNoticeAfter, "only the delay notice: nothing to send")

        let registered = client.registered(keys: keys, now: t0 + .seconds(1))

        XCTAssertEqual(registered.datagrams.map(\.kind), [.hello, .text], "HELLO first, then what waited")
        XCTAssertEqual(registered.datagrams.map(\.content), ["", "early"])
        XCTAssertEqual(registered.datagrams.map(\.fromUser), ["alice", "alice"])
        XCTAssertTrue(client.isRegistered)
    }

    func testARequestsReplyIsMatchedByIdAndARefusalOrALostConnectionEndsIt() {
        var client = session()
        _ = client.registered(keys: keys, now: t0)
        let join = client.request(.roomJoin, room: "ops", now: t0)
        let who = client.request(.who, users: ["bob"], now: t0)
        let members = client.request(.roomMembers, room: "ops", now: t0)
        var answer = SIMPMessage(kind: .roomMembers, messageId: join.messageId)
        answer.room = "ops"
        answer.members = ["alice", "bob"]
        var stray = answer
        stray.messageId = 999

        let joined = client.controlReceived(answer, now: t0)
        let again = client.controlReceived(answer, now: t0)
        let strayOutput = client.controlReceived(stray, now: t0)
        let refusal = SIMPMessage.error(.badRequest, "no such user", messageId: who.messageId)
        let refused = client.controlReceived(refusal, now: t0)
        let lost = client.controlLost(mayReconnect: true, random: 0.5)

        XCTAssertEqual([join.kind, who.kind, members.kind], [.roomJoin, .who, .roomMembers])
        XCTAssertEqual([join.room, who.members.joined(), members.room], ["ops", "bob", "ops"])
        XCTAssertEqual(Set([join.messageId, who.messageId, members.messageId]).count, 3, "each request has its own id")
        XCTAssertEqual(joined.replies, [RequestReply(requestId: join.messageId, result: .success(["alice", "bob"]))])
        XCTAssertEqual(again.replies, [], "a request has one reply")
        XCTAssertEqual(strayOutput.replies, [], "a frame with no waiting request's id is no reply")
        XCTAssertEqual(refused.replies, [RequestReply(requestId: who.messageId, result: .failure(.refused(code: .badRequest, text: "no such user")))])
        XCTAssertEqual(lost.replies, [RequestReply(requestId: members.messageId, result: .failure(.connectionLost))])
    }

    func testLosingTheRelaySuspendsAndPlansAReconnectThenResends() {
        var client = session()
        _ = client.registered(keys: keys, now: t0)
        _ = client.submit(SIMPMessage(kind: .text, toUser: "bob", content: "m"), now: t0)

        let lost = client.controlLost(mayReconnect: true, random: 0.5)

        XCTAssertEqual(lost, plannedReconnect(attempt: 1, after: .seconds(1)), "the whole output: only the plan")
        XCTAssertEqual(client.connectAttemptFailed(random: 0.5), plannedReconnect(attempt: 2, after: .seconds(2)))
        XCTAssertNotEqual(
            plannedReconnect(attempt: 1, after: .seconds(1)), plannedReconnect(attempt: 1, after: .seconds(2)),
            "outputs that differ only in the plan's delay are not equal")
        XCTAssertEqual(client.poll(now: t0 + .seconds(100)).datagrams, [], "nothing retried or given up while down")
        let back = client.registered(keys: keys, now: t0 + .seconds(100))
        XCTAssertEqual(back.datagrams.filter(\.kind.isContent).map(\.attempt), [2], "the unreceipted message is sent again")
        XCTAssertEqual(client.controlLost(mayReconnect: true, random: 0.5).reconnect?.attempt, 1, "backoff reset by success")
    }

    private func plannedReconnect(attempt: Int, after delay: TimeAmount) -> ClientSession.Output {
        var output = ClientSession.Output()
        output.reconnect = ReconnectPlan(attempt: attempt, delay: delay)
        return output
    }

    func testWithoutReconnectPolicyALossPlansNothing() {
        var client = session(reconnect: nil)
        _ = client.registered(keys: keys, now: t0)
        XCTAssertNil(client.controlLost(mayReconnect: true, random: 0.5).reconnect)
    }

    /// The core, not the shell, decides when reconnecting stops, from error
    /// codes: an operator's SESSION_ENDED logs in again, a refused login stops (as a wrong
    /// password at start does), a newer session of the device (ALREADY_CONNECTED) stops.
    func testARefusedLoginOrATakeOverStopsReconnectingAnEndedSessionDoesNot() {
        var client = session()
        _ = client.registered(keys: keys, now: t0)
        _ = client.controlReceived(.error(.sessionEnded, "the relay's operator ended alice's session"), now: t0)
        XCTAssertNil(client.stopped)
        XCTAssertEqual(client.controlLost(mayReconnect: true, random: 0.5).reconnect?.attempt, 1, "an ended session logs in again")

        _ = client.beginLogin(udpPort: 4000)
        guard case .refused(.authFailed, _)? = client.loginReceived(.error(.authFailed, "login failed"), now: t0 + .seconds(1)) else {
            return XCTFail("a refused login fails the attempt")
        }
        XCTAssertEqual(client.stopped, .loginRefused(reason: "login failed"))
        XCTAssertNil(client.connectAttemptFailed(random: 0.5).reconnect, "no retry after the relay refused the login")

        var replaced = session()
        _ = replaced.registered(keys: keys, now: t0)
        _ = replaced.controlReceived(.error(.alreadyConnected, "a newer session of alice's device \"phone\" took over"), now: t0)
        XCTAssertEqual(replaced.stopped, .takenOver(reason: "a newer session of alice's device \"phone\" took over"))
        XCTAssertNil(replaced.controlLost(mayReconnect: true, random: 0.5).reconnect, "no fight with the newer session")
    }

    /// After a refused login (a locked user), the user can ask to connect again (`/reconnect`
    /// once unlocked): the core is no longer stopped, and its backoff starts afresh.
    func testTheUserCanResumeAStoppedSessionAndOnlyAStoppedOne() {
        var client = session()
        XCTAssertFalse(client.resumeAfterStop(), "not stopped: it reconnects by itself")
        _ = client.registered(keys: keys, now: t0)
        XCTAssertEqual(client.controlLost(mayReconnect: true, random: 0.5).reconnect?.attempt, 1)
        _ = client.beginLogin(udpPort: 4000)
        _ = client.loginReceived(.error(.authFailed, "login failed: your account is locked by the relay's operator"), now: t0)
        XCTAssertNil(client.connectAttemptFailed(random: 0.5).reconnect)

        XCTAssertTrue(client.resumeAfterStop())
        XCTAssertNil(client.stopped)
        XCTAssertEqual(client.connectAttemptFailed(random: 0.5).reconnect?.attempt, 1, "tries again, from the first delay")
    }

    func testHelloIsRepeatedUntilTheRelayAnswersIt() {
        var client = session()
        XCTAssertEqual(client.registered(keys: keys, now: t0).datagrams.map(\.kind), [.hello])
        XCTAssertEqual(client.poll(now: t0 + .milliseconds(250)).datagrams.map(\.kind), [.hello], "unanswered: again")
        var relay = DatagramSealer(keys: keys, direction: .downlink)
        var forged = DatagramSealer(keys: SessionKeys(sessionId: 42, secret: Array(repeating: 8, count: 32)), direction: .downlink)
        _ = client.datagramArrived(forged.seal(SIMPMessage(kind: .hello)), arrivedAt: t0, now: t0)
        XCTAssertEqual(client.rejectedDatagrams, 1, "a HELLO under another key is dropped")
        XCTAssertEqual(client.poll(now: t0 + .milliseconds(500)).datagrams.map(\.kind), [.hello])

        _ = client.datagramArrived(relay.seal(SIMPMessage(kind: .hello)), arrivedAt: t0, now: t0 + .milliseconds(510))

        XCTAssertEqual(client.poll(now: t0 + .seconds(3)).datagrams, [], "answered: no more HELLOs")
    }

    func testDatagramsFromTheRelayAreOpenedWithTheSessionKey() {
        var client = session()
        _ = client.registered(keys: keys, now: t0)
        var relay = DatagramSealer(keys: keys, direction: .downlink)
        var message = SIMPMessage(kind: .text, messageId: 7, fromUser: "bob", toUser: "alice", content: "hi")
        message.attempt = 1
        let sealed = relay.seal(message)

        XCTAssertEqual(client.datagramArrived(sealed, arrivedAt: t0, now: t0).delivered.map(\.content), ["hi"])
        XCTAssertEqual(client.datagramArrived(sealed, arrivedAt: t0, now: t0).delivered, [], "a replayed datagram")
        XCTAssertEqual(client.rejectedDatagrams, 1)
        XCTAssertEqual(client.datagramArrived(MessageCodec.encode(message), arrivedAt: t0, now: t0).delivered, [], "unsealed")
        XCTAssertEqual(client.rejectedDatagrams, 2)
    }

    func testPingsKeepalivesAndASilentRelay() {
        var client = session()
        _ = client.registered(keys: keys, now: t0)
        var relay = DatagramSealer(keys: keys, direction: .downlink)
        _ = client.datagramArrived(relay.seal(SIMPMessage(kind: .hello)), arrivedAt: t0, now: t0)

        let at5 = client.poll(now: t0 + .seconds(5))
        XCTAssertEqual(at5.controlFrames.map(\.kind), [.ping])
        let at10 = client.poll(now: t0 + .seconds(10))
        XCTAssertEqual(at10.datagrams.map(\.kind), [.hello], "UDP keepalive: a HELLO probe, answered (docs/PROTOCOL.md §5.5)")
        XCTAssertEqual(at10.datagrams.first?.fromUser, "alice")
        XCTAssertTrue(client.poll(now: t0 + .seconds(15)).closeControl, "15 s of silence")
    }

    /// A message sent after the relay was silent for `suspectAfter` pings it at once, and the
    /// relay is given up `answerWithin` later unless heard, although its idle interval (a
    /// minute here) is far off; a relay heard meanwhile is kept. Failed before: the client
    /// pinged only on its interval.
    func testAMessageToASilentRelayPingsItAndGivesItUpUnlessItAnswers() {
        var configuration = ClientSession.Configuration(user: "alice", firstMessageId: 100)
        configuration.heartbeat = HeartbeatPolicy(interval: .seconds(60), missLimit: 2, suspectAfter: .seconds(5), answerWithin: .seconds(10))
        configuration.datagramPaths = nil
        var client = ClientSession(configuration: configuration)
        _ = client.registered(keys: keys, now: t0)

        let early = client.submit(SIMPMessage(kind: .text, toUser: "bob", content: "1"), now: t0 + .seconds(2))
        XCTAssertEqual(early.output.controlFrames.map(\.kind), [], "the relay registered the session 2 s ago")
        _ = client.controlReceived(SIMPMessage(kind: .receipt, messageId: early.messageId, toUser: "bob"), now: t0 + .seconds(3))

        let sent = client.submit(SIMPMessage(kind: .text, toUser: "bob", content: "2"), now: t0 + .seconds(9))
        XCTAssertEqual(sent.output.controlFrames.map(\.kind), [.ping], "the relay was silent for 6 s")
        let again = client.submit(SIMPMessage(kind: .text, toUser: "bob", content: "3"), now: t0 + .seconds(10))
        XCTAssertEqual(again.output.controlFrames.map(\.kind), [], "one suspicion at a time")
        XCTAssertFalse(client.poll(now: t0 + .milliseconds(18_900)).closeControl)
        XCTAssertTrue(client.poll(now: t0 + .seconds(19)).closeControl, "silent 10 s after the ping")

        var answered = ClientSession(configuration: configuration)
        _ = answered.registered(keys: keys, now: t0)
        XCTAssertEqual(
            answered.submit(SIMPMessage(kind: .text, toUser: "bob", content: "1"), now: t0 + .seconds(9)).output.controlFrames.map(\.kind), [.ping])
        _ = answered.controlReceived(SIMPMessage(kind: .pong, messageId: 1), now: t0 + .seconds(10))
        XCTAssertFalse(answered.poll(now: t0 + .seconds(19)).closeControl, "the relay answered")
    }

    func testIncomingDatagramIsReceiptedOnTheControlChannelAndDelivered() {
        var client = session()
        _ = client.registered(keys: keys, now: t0)
        var message = SIMPMessage(kind: .text, messageId: 7, fromUser: "bob", toUser: "alice", content: "hi")
        message.attempt = 1

        let output = client.datagramReceived(message, arrivedAt: t0, now: t0)

        XCTAssertEqual(output.controlFrames.map(\.kind), [.receipt])
        XCTAssertEqual(output.delivered.map(\.content), ["hi"])
        let pong = client.controlReceived(SIMPMessage(kind: .ping, messageId: 3), now: t0)
        XCTAssertEqual(pong.controlFrames.map { [$0.kind.rawValue, Int32($0.messageId)] }, [[SIMPMessage.Kind.pong.rawValue, 3]])
    }
}

/// A receipt means the application has the message, and it reaches the relay even across a
/// lost control connection.
final class ClientSessionReceiptTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
    private let keys = SessionKeys(sessionId: 42, secret: Array(repeating: 7, count: 32))

    private func session() -> ClientSession {
        var configuration = ClientSession.Configuration(user: "alice", firstMessageId: 100)
        configuration.heartbeat = HeartbeatPolicy(interval: .seconds(5), missLimit: 3)
        configuration.orderingHoldLimit = .seconds(2)
        configuration.receiptsWhenReleased = true
        return ClientSession(configuration: configuration)
    }

    private func message(_ seq: UInt64) -> SIMPMessage {
        var message = SIMPMessage(kind: .text, messageId: 50 + seq, fromUser: "bob", toUser: "alice", content: "\(seq)")
        (message.stream, message.seq, message.floor, message.attempt) = (9, seq, 1, 1)
        return message
    }

    func testAHeldMessageIsReceiptedWhenReleasedEvenAfterTheConnectionWasLost() {
        var client = session()
        _ = client.registered(keys: keys, now: t0)
        let arrival = client.datagramReceived(message(2), arrivedAt: t0, now: t0).controlFrames
        XCTAssertEqual(arrival.map(\.held), [true], "held: only a HELD receipt")
        XCTAssertEqual(client.receiptsOwed, 0, "a HELD receipt is a hint, not owed across a reconnect")
        _ = client.controlLost(mayReconnect: true, random: 0.5)

        XCTAssertEqual(client.poll(now: t0 + .seconds(5)).delivered, [], "the hold limit does not count while reconnecting")
        let released = client.datagramReceived(message(1), arrivedAt: t0 + .seconds(6), now: t0 + .seconds(6))
        XCTAssertEqual(released.delivered.map(\.content), ["1", "2"], "the gap filled while reconnecting")
        XCTAssertEqual(released.controlFrames.filter { $0.kind == .receipt }, [], "no connection to receipt on")
        XCTAssertEqual(client.receiptsOwed, 2)

        let again = client.registered(keys: keys, now: t0 + .seconds(7))
        XCTAssertEqual(again.controlFrames.filter { $0.kind == .receipt }.map(\.messageId), [51, 52], "owed receipts go out after login")
    }

    func testReceiptsOfMessagesTheApplicationDidNotTakeAreWithdrawn() {
        var client = session()
        _ = client.registered(keys: keys, now: t0)
        var output = client.datagramReceived(message(1), arrivedAt: t0, now: t0)
        XCTAssertEqual(output.controlFrames.map(\.messageId), [51])
        XCTAssertEqual(client.receiptsOwed, 1)
        client.stopTakingMessages()
        client.withdrawReceipts(of: output.delivered, from: &output)
        XCTAssertEqual(output.controlFrames.filter { $0.kind == .receipt }, [], "no receipt for a message not taken")
        XCTAssertEqual(output.datagrams.filter { $0.kind == .receipt }, [], "nor its datagram copy")
        XCTAssertEqual(client.receiptsOwed, 0, "nor owed to the next connection")
        XCTAssertEqual(client.datagramReceived(message(2), arrivedAt: t0, now: t0), ClientSession.Output(), "later content is not taken")
    }

    func testPastItsDeliveryLimitTheSessionHandsOverAndReceiptsNothingMore() {
        var configuration = ClientSession.Configuration(user: "alice", firstMessageId: 100)
        configuration.deliveryLimit = 1
        var client = ClientSession(configuration: configuration)
        _ = client.registered(keys: keys, now: t0)
        _ = client.datagramReceived(message(2), arrivedAt: t0, now: t0) // held behind seq 1
        var output = client.datagramReceived(message(1), arrivedAt: t0, now: t0)
        XCTAssertEqual(output.delivered.map(\.content), ["1", "2"])
        var taken: [String] = []
        client.handOver(&output) {
            taken.append($0.content); return true
        }
        XCTAssertEqual(taken, ["1"], "one message, the limit")
        XCTAssertEqual(output.controlFrames.filter { $0.kind == .receipt }.map(\.messageId), [51], "no final receipt for seq 2: it comes again")
        XCTAssertFalse(client.takesMessages)
    }

    /// A message that lets the shell hand over others that waited for it (a sender key and its
    /// held room posts) counts each of them once: the limit is reached, and what follows is not
    /// taken. `take` is told what is left of the limit.
    func testMessagesHandedOverWithAnotherCountOnceAgainstTheDeliveryLimit() {
        var configuration = ClientSession.Configuration(user: "alice", firstMessageId: 100)
        configuration.deliveryLimit = 3
        var client = ClientSession(configuration: configuration)
        _ = client.registered(keys: keys, now: t0)
        _ = client.datagramReceived(message(3), arrivedAt: t0, now: t0)
        _ = client.datagramReceived(message(2), arrivedAt: t0, now: t0)
        var output = client.datagramReceived(message(1), arrivedAt: t0, now: t0)
        XCTAssertEqual(output.delivered.map(\.content), ["1", "2", "3"])
        var allowances: [Int?] = []
        client.handOver(&output) { message, allowance in
            allowances.append(allowance)
            return message.content == "2" ? 2 : 1 // "2" let one waiting message through
        }
        XCTAssertEqual(allowances, [3, 2], "seq 3 is not offered: the limit is reached")
        XCTAssertEqual(client.messagesTaken, 3)
        XCTAssertFalse(client.takesMessages)
        XCTAssertEqual(output.controlFrames.filter { $0.kind == .receipt }.map(\.messageId), [51, 52], "no receipt for seq 3: it comes again")
    }

    func testReceiptsNotConfirmedByAPongAreSentAgainAfterAReconnect() {
        var client = session()
        _ = client.registered(keys: keys, now: t0)
        XCTAssertEqual(client.datagramReceived(message(1), arrivedAt: t0, now: t0).controlFrames.map(\.messageId), [51])
        let ping = client.poll(now: t0 + .seconds(5)).controlFrames.first { $0.kind == .ping }!
        XCTAssertEqual(client.datagramReceived(message(2), arrivedAt: t0 + .seconds(6), now: t0 + .seconds(6)).controlFrames.map(\.messageId), [52])
        _ = client.controlReceived(SIMPMessage(kind: .pong, messageId: ping.messageId), now: t0 + .seconds(6))
        XCTAssertEqual(client.receiptsOwed, 1, "the PONG confirms the receipt written before its PING")

        _ = client.controlLost(mayReconnect: true, random: 0.5)
        let again = client.registered(keys: keys, now: t0 + .seconds(8))
        XCTAssertEqual(again.controlFrames.filter { $0.kind == .receipt }.map(\.messageId), [52])
    }

    /// Pings wait for silence, but a receipt is still confirmed soon: a client that keeps
    /// hearing from the relay sends a PING `receiptConfirmDelay` after its first unconfirmed
    /// receipt, and none while it owes nothing.
    func testAReceiptIsConfirmedByAPingWhileTheRelayIsChatty() throws {
        var client = session()
        _ = client.registered(keys: keys, now: t0)
        let relayPing = SIMPMessage(kind: .ping, messageId: 99) // any frame from the relay
        for second in 1...4 { _ = client.controlReceived(relayPing, now: t0 + .seconds(Int64(second))) }
        XCTAssertEqual(client.poll(now: t0 + .seconds(5)).controlFrames.map(\.kind), [], "heard a second ago, owes nothing")
        XCTAssertEqual(client.datagramReceived(message(1), arrivedAt: t0 + .seconds(5), now: t0 + .seconds(5)).controlFrames.map(\.messageId), [51])
        _ = client.controlReceived(relayPing, now: t0 + .seconds(9))
        XCTAssertLessThanOrEqual(try XCTUnwrap(client.nextDeadline), t0 + .seconds(10))
        let ping = client.poll(now: t0 + .seconds(10)).controlFrames.first { $0.kind == .ping }
        XCTAssertNotNil(ping, "five seconds after the receipt, though the relay spoke a second ago")
        _ = client.controlReceived(SIMPMessage(kind: .pong, messageId: ping?.messageId ?? 0), now: t0 + .seconds(10))
        XCTAssertEqual(client.receiptsOwed, 0)
        XCTAssertEqual(client.poll(now: t0 + .seconds(14)).controlFrames.map(\.kind), [], "nothing more to confirm")
    }

    /// With the default heartbeat a silent relay is given up after 50 s, but while a message
    /// waits behind a gap the relay is given up after 15 s: before the 30 s hold limit would
    /// skip the gap (and deliver out of order what the relay fills in after a reconnect).
    func testASilentRelayIsGivenUpBeforeTheHoldLimitWhileAMessageIsHeld() {
        var configuration = ClientSession.Configuration(user: "alice", firstMessageId: 100)
        configuration.orderingHoldLimit = .seconds(30)
        var client = ClientSession(configuration: configuration)
        _ = client.registered(keys: keys, now: t0)
        XCTAssertEqual(client.datagramReceived(message(2), arrivedAt: t0, now: t0).delivered, [], "held behind seq 1")
        XCTAssertEqual(client.poll(now: t0 + .seconds(5)).controlFrames.map(\.kind).filter { $0 == .ping }, [.ping], "the relay is probed")
        XCTAssertFalse(client.poll(now: t0 + .seconds(14)).closeControl)
        let given = client.poll(now: t0 + .seconds(15))
        XCTAssertTrue(given.closeControl, "15 s of silence while holding")
        XCTAssertEqual(given.delivered, [], "the gap is not skipped")
    }

    func testAStoredMessageReceiptedByItsReceiverIsDeliveredAndNotFailedByALaterDiscard() {
        var client = session()
        _ = client.registered(keys: keys, now: t0)
        let id = client.submit(SIMPMessage(kind: .text, toUser: "bob", content: "x"), now: t0).messageId
        var stored = SIMPMessage(kind: .receipt, messageId: id, fromUser: "bob", toUser: "alice")
        stored.status = .stored
        XCTAssertEqual(client.controlReceived(stored, now: t0 + .milliseconds(10)).notices, [.stored(messageId: id, to: "bob")])

        let receipt = SIMPMessage(kind: .receipt, messageId: id, fromUser: "bob", toUser: "alice")
        var heldReceipt = receipt
        heldReceipt.held = true
        XCTAssertEqual(client.controlReceived(heldReceipt, now: t0 + .seconds(1)).notices, [], "arrived, not yet delivered")
        XCTAssertEqual(client.controlReceived(receipt, now: t0 + .seconds(1)).notices, [.delivered(messageId: id, to: "bob")])
        var discarded = SIMPMessage.error(.inboxFull, "bob's inbox is full", messageId: id)
        discarded.fromUser = "bob"
        XCTAssertEqual(client.controlReceived(discarded, now: t0 + .seconds(2)).notices, [], "the receiver has it: nothing was lost")
    }

    /// ERROR INBOX_FULL for a message still pending (the offline receiver's log refused it): no
    /// notice, no failure; the message stays pending and goes out again.
    func testInboxFullForAPendingMessageKeepsItPending() {
        var client = session()
        _ = client.registered(keys: keys, now: t0)
        var relay = DatagramSealer(keys: keys, direction: .downlink)
        _ = client.datagramArrived(relay.seal(SIMPMessage(kind: .hello)), arrivedAt: t0, now: t0) // UDP works
        let id = client.submit(SIMPMessage(kind: .text, toUser: "bob", content: "x"), now: t0).messageId
        var full = SIMPMessage.error(.inboxFull, "bob's inbox is full; try again later", messageId: id)
        full.fromUser = "bob"
        let output = client.controlReceived(full, now: t0 + .milliseconds(10))
        XCTAssertEqual(output.notices, [])
        XCTAssertEqual(output.outcomes, [])
        XCTAssertTrue(client.sender.isPending(id))
        XCTAssertEqual(client.poll(now: t0 + .seconds(2)).datagrams.map(\.messageId).filter { $0 == id }.count, 2, "sent again (two copies)")
    }

    /// While the control connection is down the receiver's hold limit stops; it runs again from
    /// the next registration.
    func testTheHoldClockStopsWhileTheControlConnectionIsDown() {
        var client = session()
        _ = client.registered(keys: keys, now: t0)
        _ = client.controlReceived(SIMPMessage(kind: .pong, messageId: 0), now: t0 + .seconds(1))
        _ = client.controlLost(mayReconnect: true, random: 0.5)
        XCTAssertEqual(client.receiver.holdClockStoppedAt, t0 + .seconds(1), "stopped from when the relay was last heard")
        _ = client.registered(keys: keys, now: t0 + .seconds(90))
        XCTAssertNil(client.receiver.holdClockStoppedAt)
    }
}
