import NIOCore
import SIMPCore
import SIMPCoreTestKit
import XCTest

/// The relay and HELD receipts (docs/PROTOCOL.md §6.6 rule 4): a stored message the device
/// holds behind a gap stays in its log (no cursor move, no DELIVERED_FROM_INBOX) until its final
/// receipt, and the relay, as its retransmitting sender, stops rushing it.
final class RelayCoreHeldReceiptTests: XCTestCase {
    private let t0 = DevRelay.t0
    private let alice = ConnectionID(1), bob = ConnectionID(2)

    private func stored(_ id: UInt64, seq: UInt64) -> InboxEntry {
        var message = SIMPMessage(kind: .text, messageId: id, fromUser: "alice", toUser: "bob", content: "hi \(id)")
        (message.stream, message.seq, message.floor) = (5, seq, 1)
        return InboxEntry(message: message, storedAt: 1000)
    }

    private func held(_ message: SIMPMessage) -> SIMPMessage {
        var receipt = message.receipt(holdMicros: 0)
        receipt.held = true
        return receipt
    }

    func testAHeldReceiptKeepsTheStoredEntryUntilTheFinalReceipt() throws {
        var relay = DevRelay {
            $0.inboxRetransmit = .oneCopy
            $0.inboxRetransmit.initialRTO = .milliseconds(100)
        }
        try relay.connect("alice", on: alice, port: 5001)
        try relay.connect("bob", on: bob, port: 5002)
        let first = stored(1, seq: 1), second = stored(2, seq: 2)
        let sent = try relay.delivered(to: "bob", in: relay.answer(.loadInbox(user: "bob", [first, second], wallNow: 2000)))
        XCTAssertEqual(sent.map(\.messageId), [1, 2])

        XCTAssertEqual(
            relay.control(held(sent[1]), on: bob, now: t0 + .milliseconds(20)), [],
            "arrived, not delivered: the cursor stays, alice hears nothing")
        let resent = try relay.delivered(to: "bob", in: relay.tick(now: t0 + .milliseconds(500)))
        XCTAssertEqual(resent.map(\.messageId), [1], "the held entry is not rushed; the missing one is")

        XCTAssertEqual(
            relay.control(sent[0].receipt(holdMicros: 0), on: bob, now: t0 + .milliseconds(520)),
            [.store(.removeFromInbox(user: "bob", entry: first)), .send(alice, statusReceipt(1, from: "bob", to: "alice", .deliveredFromInbox))])
        XCTAssertEqual(
            relay.control(sent[1].receipt(holdMicros: 500_000), on: bob, now: t0 + .milliseconds(521)),
            [.store(.removeFromInbox(user: "bob", entry: second)), .send(alice, statusReceipt(2, from: "bob", to: "alice", .deliveredFromInbox))],
            "the final receipt moves the cursor")
    }

    func testAHeldEntryIsStillSentAgainSlowlyForADeviceThatMayHaveRestarted() throws {
        var relay = DevRelay { $0.inboxRetransmit = .oneCopy }
        try relay.connect("bob", on: bob, port: 5002)
        let sent = try relay.delivered(
            to: "bob", in: relay.answer(.loadInbox(user: "bob", [stored(2, seq: 2)], wallNow: 2000)))
        _ = relay.control(held(sent[0]), on: bob, now: t0 + .milliseconds(20))
        let maximum = relay.core.configuration.inboxRetransmit.maximumRTO
        XCTAssertEqual(try relay.delivered(to: "bob", in: relay.tick(now: t0 + maximum - .milliseconds(1))), [])
        XCTAssertEqual(try relay.delivered(to: "bob", in: relay.tick(now: t0 + maximum)).map(\.attempt), [2])
    }

    func testDirectDatagramsHeldBehindStoredOnesGoOutOnceTheStoredOnesHaveArrived() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        try relay.connect("bob", on: bob, port: 5002)
        let entry = stored(10, seq: 2)
        let sent = relay.answer(.loadInbox(user: "bob", [entry], wallNow: 2))
        let copy = try XCTUnwrap(relay.delivered(to: "bob", in: sent).first)
        XCTAssertEqual(sent, [relay.delivery(copy, to: "bob")])
        var direct = SIMPMessage(kind: .text, messageId: 9, fromUser: "alice", toUser: "bob")
        (direct.stream, direct.seq, direct.floor) = (5, 1, 1) // the gap bob holds seq 2 behind
        XCTAssertEqual(relay.send(direct), [], "held behind the stored message")

        XCTAssertEqual(
            relay.control(held(copy), on: bob), [relay.delivery(direct, to: "bob")],
            "the stored one arrived (held by bob): the direct one can no longer overtake it")
        XCTAssertEqual(relay.send(direct), [relay.delivery(direct, to: "bob")], "no longer held")
    }

    func testAHeldReceiptIsForwardedAsItsBytesWhenNothingIsStoredInFlight() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        try relay.connect("bob", on: bob, port: 5002)
        var receipt = held(textMessage(31, from: "alice", to: "bob"))
        receipt.attempt = 2
        var taken = false
        let actions = relay.run { taken = $0.receiptFrameReceived(MessageCodec.encode(receipt), on: self.bob, now: DevRelay.t0, into: &$1) }
        XCTAssertTrue(taken)
        XCTAssertEqual(actions, [.forward(alice, MessageCodec.encode(receipt))], "field 52 travels with the bytes")
    }

    func testAHeldReceiptForAMessageNotStoredIsForwardedToItsSenderAsItCame() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        try relay.connect("bob", on: bob, port: 5002)
        var receipt = held(textMessage(4, from: "alice", to: "bob"))
        receipt.attempt = 1
        XCTAssertEqual(relay.control(receipt, on: bob), [.send(alice, receipt)])
    }

    // MARK: Datagram copies

    func testTheDatagramCopyOfAHeldReceiptForAStoredMessageStaysWithTheRelay() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        try relay.connect("bob", on: bob, port: 5002)
        let entry = stored(10, seq: 2)
        let copy = try XCTUnwrap(
            relay.delivered(to: "bob", in: relay.answer(.loadInbox(user: "bob", [entry], wallNow: 2))).first)
        XCTAssertEqual(relay.send(held(copy)), [], "the relay is the stored message's sender: alice never sees its HELD or its attempts")
        XCTAssertEqual(relay.send(copy.receipt(holdMicros: 0)), [], "nor the final receipt's copy: the control copy settles it")
        XCTAssertEqual(
            relay.control(copy.receipt(holdMicros: 0), on: bob),
            [.store(.removeFromInbox(user: "bob", entry: entry)), .send(alice, statusReceipt(10, from: "bob", to: "alice", .deliveredFromInbox))])
    }

    func testABatchCopyLosesOnlyTheIdsOfStoredMessages() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        try relay.connect("bob", on: bob, port: 5002)
        let copy = try XCTUnwrap(
            relay.delivered(to: "bob", in: relay.answer(.loadInbox(user: "bob", [stored(10, seq: 2)], wallNow: 2))).first)
        var batch = copy.receipt(holdMicros: 0)
        batch.receiptIds = [11, 12] // direct messages bob got from alice meanwhile
        var rest = batch
        (rest.messageId, rest.attempt, rest.receiptIds) = (11, 0, [12])
        XCTAssertEqual(relay.send(batch), [relay.delivery(rest, to: "alice")])
    }
}
