import NIOCore
import SIMPCore
import SIMPCoreTestKit
import XCTest

/// The relay core's offline inbox: stored receipts, delivery from the inbox when the user comes
/// back, retransmissions and retried reads driven by `tick`, and the order of direct datagrams
/// behind stored ones.
final class RelayCoreInboxTests: XCTestCase {
    private let t0 = DevRelay.t0
    private let alice = ConnectionID(1), bob = ConnectionID(2)

    private func stored(_ id: UInt64, from sender: String = "alice", to receiver: String = "bob", seq: UInt64 = 0) -> InboxEntry {
        var message = SIMPMessage(kind: .text, messageId: id, fromUser: sender, toUser: receiver, content: "hi \(id)")
        if seq > 0 {
            message.stream = 5
            message.seq = seq
        }
        return InboxEntry(message: message, storedAt: 1000)
    }

    /// Bob's inbox read with `entries`; returns what was sent and what bob's client opened.
    private func load(_ entries: [InboxEntry], into relay: inout DevRelay) throws -> (actions: [RelayAction], opened: [SIMPMessage]) {
        let actions = relay.answer(.loadInbox(user: "bob", entries, wallNow: 2000))
        let opened = try relay.delivered(to: "bob", in: actions)
        XCTAssertEqual(actions, opened.map { relay.delivery($0, to: "bob") }, "only datagrams sealed for bob")
        return (actions, opened)
    }

    func testStoredReceiptThenDeliveryFromInboxThenDeliveredReceipt() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        let entry = stored(77, seq: 1)

        XCTAssertEqual(
            relay.answer(.storeInInbox(user: "bob", message: entry.message, entry, InboxStoreResult(duplicate: false))),
            [
                .event(.inboxStored(InboxStored(user: "bob", from: "alice", messageId: 77, kind: .text))),
                .send(alice, statusReceipt(77, from: "bob", to: "alice", .stored)), .store(.lookup(user: "bob")),
            ],
            "stored, then alice hears it; bob's relay, if any, is asked to hand it over")

        XCTAssertEqual(try relay.connect("bob", on: bob, port: 5002), relay.registeredActions("bob"), "bob's inbox is read on connect")
        let (delivery, opened) = try load([entry], into: &relay)
        guard case .deliver("bob", _, let address)? = delivery.first else { return XCTFail("\(delivery)") }
        XCTAssertEqual(address.port, 5002)
        let sent = try XCTUnwrap(opened.first, "sealed for bob")
        XCTAssertEqual([sent.messageId, sent.stream, sent.seq], [77, 5, 1])
        XCTAssertEqual(sent.attempt, 1)
        XCTAssertEqual(sent.fromUser, "alice")

        XCTAssertEqual(
            relay.control(sent.receipt(holdMicros: 0), on: bob),
            [.store(.removeFromInbox(user: "bob", entry: entry)), .send(alice, statusReceipt(77, from: "bob", to: "alice", .deliveredFromInbox))])
    }

    func testDeliveredReceiptForAnOfflineSenderIsStoredForIt() throws {
        var relay = DevRelay()
        try relay.connect("bob", on: bob, port: 5002)
        let entry = stored(8)
        let message = try XCTUnwrap(try load([entry], into: &relay).opened.first)
        XCTAssertEqual(
            relay.control(message.receipt(holdMicros: 0), on: bob),
            [
                .store(.removeFromInbox(user: "bob", entry: entry)),
                .store(.storeInInbox(user: "alice", message: statusReceipt(8, from: "bob", to: "alice", .deliveredFromInbox))),
            ])
    }

    func testDiscardedEntriesAreCountedAndTheirSendersTold() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        let old = InboxEntry(message: SIMPMessage(kind: .text, messageId: 1, fromUser: "alice", toUser: "bob"), storedAt: 1)
        let new = InboxEntry(message: SIMPMessage(kind: .text, messageId: 2, fromUser: "alice", toUser: "bob"), storedAt: 2)
        let request = StoreRequest.storeInInbox(user: "bob", message: new.message)
        var expired = SIMPMessage.error(.inboxExpired, "bob did not come back in time; the message was discarded", messageId: 1, to: "alice")
        expired.fromUser = "bob"
        XCTAssertEqual(
            relay.answer(
                .storeInInbox(
                    user: "bob", message: new.message, new,
                    InboxStoreResult(duplicate: false, discarded: [DiscardedEntry(entry: old, reason: .expired)]))),
            [
                .reject(.inboxExpired, detail: "\(SIMPMessage.Kind.text) 1 from alice to bob"), .send(alice, expired),
                .event(.inboxStored(InboxStored(user: "bob", from: "alice", messageId: 2, kind: .text))),
                .send(alice, statusReceipt(2, from: "bob", to: "alice", .stored)), .store(.lookup(user: "bob")),
            ])
        XCTAssertEqual(
            relay.fail(request, StoreFailure("down")),
            [.reject(.inboxUnavailable, detail: "alice -> bob (\(SIMPMessage.Kind.text))")], "a failed store is counted")
    }

    /// A full log refused the message: counted, its sender told INBOX_FULL naming it (to send it
    /// again later), and no STORED (nothing was stored), nothing handed over or routed.
    func testAMessageTheFullLogRefusedIsNotStoredAndItsSenderIsTold() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        let new = InboxEntry(message: SIMPMessage(kind: .text, messageId: 2, fromUser: "alice", toUser: "bob"), storedAt: 2)
        var full = SIMPMessage.error(.inboxFull, "bob's inbox is full; try again later", messageId: 2, to: "alice")
        full.fromUser = "bob"
        XCTAssertEqual(
            relay.answer(.storeInInbox(user: "bob", message: new.message, new, InboxStoreResult(duplicate: false, refused: true))),
            [.reject(.inboxFull, detail: "\(SIMPMessage.Kind.text) 2 from alice to bob"), .send(alice, full)])
    }

    func testAFailedInboxReadIsRetriedAfterTheRetryDelayWhileTheUserStays() throws {
        var relay = DevRelay()
        try relay.connect("bob", on: bob, port: 5002)
        try relay.connect("carol", on: ConnectionID(3), port: 5003)
        let delay = relay.core.configuration.inboxRetryDelay
        XCTAssertEqual(relay.fail(.loadInbox(user: "bob"), StoreFailure("down")), [])
        XCTAssertEqual(relay.fail(.loadInbox(user: "carol"), StoreFailure("down"), now: t0 + .milliseconds(1)), [])
        XCTAssertEqual(relay.core.nextDeadline, t0 + delay)
        XCTAssertEqual(relay.tick(now: t0 + delay - .nanoseconds(1)), [])
        XCTAssertEqual(relay.tick(now: t0 + delay), [.store(.loadInbox(user: "bob"))])
        _ = relay.closed(ConnectionID(3))
        XCTAssertEqual(relay.tick(now: t0 + delay + .milliseconds(1)), [], "carol left: her inbox is read when she comes back")
        XCTAssertEqual(relay.tick(now: t0 + delay + delay), [], "each failure is retried once")
    }

    func testUnreceiptedStoredMessagesAreRetransmittedOnTick() throws {
        var relay = DevRelay {
            $0.inboxRetransmit = .oneCopy
            $0.inboxRetransmit.initialRTO = .milliseconds(100)
        }
        try relay.connect("bob", on: bob, port: 5002)
        let first = try XCTUnwrap(try load([stored(3, seq: 1)], into: &relay).opened.first)
        let deadline = relay.core.nextDeadline
        XCTAssertLessThan(deadline, t0 + .seconds(1), "the retransmission is due before anything else")
        XCTAssertEqual(relay.tick(now: deadline - .nanoseconds(1)), [])
        let again = relay.tick(now: deadline)
        let resent = try relay.delivered(to: "bob", in: again)
        XCTAssertEqual(again, resent.map { relay.delivery($0, to: "bob") })
        var expected = first
        expected.attempt = 2
        XCTAssertEqual(resent, [expected], "the same message, the relay's second transmission")
    }
}

final class InboxOrderingTests: XCTestCase {
    func testDirectDatagramsWaitUntilStoredOnesFromTheSameSenderAreReceipted() throws {
        var relay = DevRelay()
        let alice = ConnectionID(1), bob = ConnectionID(2)
        try relay.connect("alice", on: alice, port: 5001)
        try relay.connect("bob", on: bob, port: 5002)
        try relay.connect("carol", on: ConnectionID(3), port: 5003)
        var stored = SIMPMessage(kind: .text, messageId: 10, fromUser: "alice", toUser: "bob")
        stored.stream = 10
        stored.seq = 1
        let entry = InboxEntry(message: stored, storedAt: 1)
        let sent = relay.answer(.loadInbox(user: "bob", [entry], wallNow: 2))
        let copy = try XCTUnwrap(relay.delivered(to: "bob", in: sent).first)
        XCTAssertEqual(sent, [relay.delivery(copy, to: "bob")])

        var direct = SIMPMessage(kind: .text, messageId: 11, fromUser: "alice", toUser: "bob")
        direct.stream = 10
        direct.seq = 2
        direct.floor = 2
        XCTAssertEqual(relay.send(direct), [], "held behind the stored message")
        XCTAssertEqual(relay.send(direct), [], "a retransmission is held once")
        let fromCarol = SIMPMessage(kind: .text, messageId: 5, fromUser: "carol", toUser: "bob")
        XCTAssertEqual(relay.send(fromCarol), [relay.delivery(fromCarol, to: "bob")], "other senders are not held")

        XCTAssertEqual(
            relay.control(copy.receipt(holdMicros: 0), on: bob),
            [
                .store(.removeFromInbox(user: "bob", entry: entry)), .send(alice, statusReceipt(10, from: "bob", to: "alice", .deliveredFromInbox)),
                relay.delivery(direct, to: "bob"),
            ], "released once the stored message is receipted")
        XCTAssertEqual(relay.send(direct), [relay.delivery(direct, to: "bob")], "no longer held")
    }
}
