import NIOCore
import SIMPCore
import SIMPCoreTestKit
import XCTest

/// The relay's routing of batch receipts (docs/PROTOCOL.md §6.1): one frame on to the sender,
/// split only while the receiver's stored messages are being delivered.
final class RelayCoreBatchReceiptTests: XCTestCase {
    private let alice = ConnectionID(1), bob = ConnectionID(2)

    private func batch(_ id: UInt64, ids: [UInt64], attempt: UInt32 = 1) -> SIMPMessage {
        var batch = SIMPMessage(kind: .receipt, messageId: id, fromUser: "mallory", toUser: "alice")
        batch.attempt = attempt
        batch.holdMicros = 70
        batch.receiptIds = ids
        return batch
    }

    func testABatchGoesOnAsOneFrameVouchedForByTheRelay() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        try relay.connect("bob", on: bob, port: 5002)
        var expected = batch(40, ids: [31, 32, 33])
        expected.fromUser = "bob"
        XCTAssertEqual(relay.control(batch(40, ids: [31, 32, 33]), on: bob), [.send(alice, expected)])
    }

    func testWhileTheInboxDeliversItClaimsItsIdsAndTheSenderGetsTheRest() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        try relay.connect("bob", on: bob, port: 5002)
        let entry = InboxEntry(message: SIMPMessage(kind: .text, messageId: 77, fromUser: "alice", toUser: "bob", content: "stored"), storedAt: 1000)
        let loaded = relay.answer(.loadInbox(user: "bob", [entry], wallNow: 2000))
        XCTAssertEqual(try relay.delivered(to: "bob", in: loaded).map(\.messageId), [77])

        var rest = batch(90, ids: [78, 79])
        rest.fromUser = "bob"
        XCTAssertEqual(
            relay.control(batch(90, ids: [77, 78, 79]), on: bob),
            [
                .store(.removeFromInbox(user: "bob", entry: entry)),
                .send(alice, statusReceipt(77, from: "bob", to: "alice", .deliveredFromInbox)),
                .send(alice, rest),
            ])
    }

    func testWhenTheInboxClaimsTheSampleTheLowestIdLeftLeadsWithoutAnAttempt() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        try relay.connect("bob", on: bob, port: 5002)
        let entry = InboxEntry(message: SIMPMessage(kind: .text, messageId: 77, fromUser: "alice", toUser: "bob", content: "stored"), storedAt: 1000)
        _ = relay.answer(.loadInbox(user: "bob", [entry], wallNow: 2000))

        var rest = batch(78, ids: [79], attempt: 0)
        rest.fromUser = "bob"
        rest.holdMicros = 0
        let actions = relay.control(batch(77, ids: [78, 79]), on: bob)
        XCTAssertEqual(actions.last, .send(alice, rest))
        XCTAssertTrue(actions.contains(.store(.removeFromInbox(user: "bob", entry: entry))))
    }

    // MARK: Routing from the bytes

    /// Offers `receipt`'s bytes to the fast path; returns whether it took them and what it did.
    private func fastPath(_ receipt: SIMPMessage, on connection: ConnectionID, in relay: inout DevRelay) -> (Bool, [RelayAction]) {
        var taken = false
        let actions = relay.run { taken = $0.receiptFrameReceived(MessageCodec.encode(receipt), on: connection, now: DevRelay.t0, into: &$1) }
        return (taken, actions)
    }

    func testAPlainReceiptFromItsReceiverIsForwardedAsItsBytes() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        try relay.connect("bob", on: bob, port: 5002)
        var receipt = SIMPMessage(kind: .text, messageId: 31, fromUser: "alice", toUser: "bob").receipt(holdMicros: 12)
        receipt.attempt = 2
        let (taken, actions) = fastPath(receipt, on: bob, in: &relay)
        XCTAssertTrue(taken)
        XCTAssertEqual(actions, [.forward(alice, MessageCodec.encode(receipt))])
    }

    func testWhatTheFastPathLeavesGoesThroughTheDecoder() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        try relay.connect("bob", on: bob, port: 5002)
        let plain = SIMPMessage(kind: .text, messageId: 31, fromUser: "alice", toUser: "bob").receipt(holdMicros: 0)
        var otherName = plain
        otherName.fromUser = "mallory" // the relay must overwrite it
        var stored = plain
        stored.status = .stored // an enum the full decoder checks
        var toNobodyHere = plain
        toNobodyHere.toUser = "carol"
        for receipt in [otherName, stored, toNobodyHere, batch(40, ids: [31])] {
            XCTAssertFalse(fastPath(receipt, on: bob, in: &relay).0, "\(receipt)")
        }
        XCTAssertFalse(fastPath(plain, on: ConnectionID(9), in: &relay).0, "not a connected session")
        XCTAssertFalse(fastPath(SIMPMessage(kind: .ping, messageId: 1), on: bob, in: &relay).0)
    }

    // MARK: Senders that do not read batches

    /// The single receipts a batch stands for, as the relay sends them to an old sender.
    private func singles(of batch: SIMPMessage, from receiver: String) -> [SIMPMessage] {
        var first = batch
        (first.fromUser, first.receiptIds) = (receiver, [])
        return [first]
            + batch.receiptIds.map { id in
                var single = first
                (single.messageId, single.attempt, single.holdMicros) = (id, 0, 0)
                return single
            }
    }

    func testASenderWhoseConnectDidNotSayItReadsBatchesGetsTheSingleReceipts() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001, acceptsBatchReceipts: false)
        try relay.connect("bob", on: bob, port: 5002)
        let expected = singles(of: batch(40, ids: [31, 32, 33]), from: "bob")
        XCTAssertEqual(expected.map(\.messageId), [40, 31, 32, 33])
        XCTAssertEqual(
            relay.control(batch(40, ids: [31, 32, 33]), on: bob), expected.map { .send(alice, $0) },
            "the sample id first, with its attempt; the others without one")
    }

    func testTheFastPathForwardsABatchOnlyToSendersThatReadBatches() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001, acceptsBatchReceipts: false)
        try relay.connect("bob", on: bob, port: 5002)
        try relay.connect("carol", on: ConnectionID(3), port: 5003)
        var toAlice = batch(40, ids: [31, 32])
        toAlice.fromUser = "bob"
        XCTAssertFalse(fastPath(toAlice, on: bob, in: &relay).0, "alice gets the single receipts from the decoder's path")
        var toCarol = toAlice
        toCarol.toUser = "carol"
        XCTAssertEqual(fastPath(toCarol, on: bob, in: &relay).1, [.forward(ConnectionID(3), MessageCodec.encode(toCarol))])
    }

    func testABatchFromAnotherRelayIsSplitForASenderThatDoesNotReadBatches() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001, acceptsBatchReceipts: false)
        var fromElsewhere = batch(40, ids: [31, 32])
        fromElsewhere.fromUser = "bob"
        XCTAssertEqual(
            relay.relayDelivery(RelayDelivery(user: "alice", payload: .control(fromElsewhere))),
            singles(of: fromElsewhere, from: "bob").map { .send(alice, $0) })
    }

    // MARK: Datagram copies

    func testAReceiptCopyForASenderOnAnotherRelayIsDroppedWithoutCountingItUnroutable() throws {
        var relay = DevRelay()
        try relay.connect("bob", on: bob, port: 5002)
        let copy = SIMPMessage(kind: .text, messageId: 31, fromUser: "carol", toUser: "bob").receipt(holdMicros: 0)
        XCTAssertEqual(relay.send(copy), [], "carol's relay gets the control copy through Redis; nothing was unroutable")
    }
}
