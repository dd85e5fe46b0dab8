import NIOCore
import SIMPCore
import XCTest

/// In-order delivery per conversation: the sender numbers and floors, the receiver holds.
final class OrderingTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    private func submit(_ sender: inout ReliableSender, to peer: String, _ text: String, at now: NIODeadline) -> SIMPMessage {
        let output = sender.submit(SIMPMessage(kind: .text, fromUser: "alice", toUser: peer, content: text), now: now).output
        return output.transmit[0]
    }

    func testSenderNumbersEachConversationFromOneAndStampsTheFloor() {
        var sender = ReliableSender(firstMessageId: 500)
        let a1 = submit(&sender, to: "bob", "a1", at: t0)
        let c1 = submit(&sender, to: "carol", "c1", at: t0)
        let a2 = submit(&sender, to: "bob", "a2", at: t0)

        XCTAssertEqual([a1.seq, a2.seq, c1.seq], [1, 2, 1])
        XCTAssertEqual(Set([a1.stream, a2.stream, c1.stream]), [sender.stream])
        XCTAssertEqual([a1.floor, a2.floor], [1, 1], "seq 1 is still unresolved")

        _ = sender.handleReceipt(a1.receipt(holdMicros: 0), now: t0 + .milliseconds(10))
        let a3 = submit(&sender, to: "bob", "a3", at: t0 + .milliseconds(10))
        XCTAssertEqual(a3.floor, 2, "seq 1 was receipted, seq 2 is the oldest open one")
    }

    func testGivingUpRaisesTheFloorOnRetransmissionsOfLaterMessages() {
        var policy = RetransmitPolicy()
        policy.maxAttempts = 1
        policy.initialRTO = .milliseconds(100)
        policy.minimumRTO = .milliseconds(50)
        var sender = ReliableSender(firstMessageId: 1, policy: policy)
        _ = submit(&sender, to: "bob", "lost", at: t0)
        let later = submit(&sender, to: "bob", "later", at: t0 + .milliseconds(50))
        XCTAssertEqual(later.floor, 1)

        let expiry = sender.poll(now: t0 + .milliseconds(100))

        XCTAssertEqual(expiry.events.count, 1, "the first message is given up")
        let stamped = sender.retransmitAll(now: t0 + .milliseconds(120)).transmit
        XCTAssertEqual(stamped.map(\.floor), [2], "the retransmission tells the receiver not to wait for seq 1")
    }

    func testReceiverHoldsEarlyMessagesUntilTheGapFills() {
        var sender = ReliableSender(firstMessageId: 1)
        let m1 = submit(&sender, to: "bob", "1", at: t0)
        let m2 = submit(&sender, to: "bob", "2", at: t0)
        let m3 = submit(&sender, to: "bob", "3", at: t0)
        var receiver = ReceiverCore()

        let early3 = receiver.receive(m3, arrivedAt: t0, now: t0)
        let early2 = receiver.receive(m2, arrivedAt: t0, now: t0)
        XCTAssertTrue(early3.deliver.isEmpty)
        XCTAssertTrue(early2.deliver.isEmpty)
        XCTAssertEqual(early3.receipts.map(\.held), [true], "a held message gets only a HELD receipt: the application does not have it")
        XCTAssertEqual(early2.receipts.map(\.held), [true])
        XCTAssertEqual(receiver.heldCount, 2)
        XCTAssertEqual(
            receiver.receive(m3, arrivedAt: t0 + .milliseconds(5), now: t0 + .milliseconds(5)).receipts.map(\.held), [true],
            "nor is a copy of a held message")

        let gapFilled = receiver.receive(m1, arrivedAt: t0 + .milliseconds(40), now: t0 + .milliseconds(40))

        XCTAssertEqual(gapFilled.deliver.map(\.content), ["1", "2", "3"])
        XCTAssertEqual(gapFilled.receipts.map(\.messageId), [m1, m2, m3].map(\.messageId), "receipted as released")
        XCTAssertEqual(gapFilled.receipts.map(\.holdMicros), [0, 40_000, 40_000], "the hold time covers the wait (RTT stays right)")
        XCTAssertEqual(receiver.heldCount, 0)
        XCTAssertEqual(receiver.deliveredLate, 0)
    }

    func testWithEarlyReceiptsAHeldMessageIsReceiptedOnArrivalAndNotAgainWhenReleased() {
        var sender = ReliableSender(firstMessageId: 1)
        let m1 = submit(&sender, to: "bob", "1", at: t0)
        let m2 = submit(&sender, to: "bob", "2", at: t0)
        var receiver = ReceiverCore(receiptsWhenReleased: false)

        let early = receiver.receive(m2, arrivedAt: t0, now: t0)
        XCTAssertEqual(early.deliver, [])
        XCTAssertEqual(early.receipts.map(\.messageId), [m2.messageId], "receipted on arrival, for fast retransmit")
        XCTAssertEqual(receiver.receive(m2, arrivedAt: t0, now: t0).receipts.map(\.messageId), [m2.messageId], "and its copies")

        let filled = receiver.receive(m1, arrivedAt: t0, now: t0)
        XCTAssertEqual(filled.deliver.map(\.content), ["1", "2"])
        XCTAssertEqual(filled.receipts.map(\.messageId), [m1.messageId], "not receipted twice")
    }

    func testFloorReleasesMessagesHeldBehindAGivenUpMessage() {
        var receiver = ReceiverCore()
        var m2 = SIMPMessage(kind: .text, messageId: 2, fromUser: "alice", toUser: "bob", content: "2")
        (m2.stream, m2.seq, m2.floor) = (9, 2, 1)
        var m3 = SIMPMessage(kind: .text, messageId: 3, fromUser: "alice", toUser: "bob", content: "3")
        (m3.stream, m3.seq, m3.floor) = (9, 3, 3) // seq 1 given up, seq 2 receipted

        XCTAssertTrue(receiver.receive(m2, arrivedAt: t0, now: t0).deliver.isEmpty)
        let released = receiver.receive(m3, arrivedAt: t0, now: t0)

        XCTAssertEqual(released.deliver.map(\.content), ["2", "3"])
    }

    func testHoldLimitSkipsAGapAndALateArrivalIsDeliveredLateRatherThanLost() {
        var receiver = ReceiverCore(holdLimit: .seconds(2))
        var m1 = SIMPMessage(kind: .text, messageId: 1, fromUser: "alice", toUser: "bob", content: "1")
        (m1.stream, m1.seq, m1.floor) = (9, 1, 1)
        var m2 = SIMPMessage(kind: .text, messageId: 2, fromUser: "alice", toUser: "bob", content: "2")
        (m2.stream, m2.seq, m2.floor) = (9, 2, 1)

        XCTAssertTrue(receiver.receive(m2, arrivedAt: t0, now: t0).deliver.isEmpty)
        XCTAssertEqual(receiver.nextDeadline, t0 + .seconds(2))
        XCTAssertEqual(receiver.poll(now: t0 + .seconds(1)), ReceiverCore.Release())
        let skipped = receiver.poll(now: t0 + .seconds(2))
        XCTAssertEqual(skipped.deliver.map(\.content), ["2"])
        XCTAssertEqual(skipped.receipts.map(\.messageId), [2])
        XCTAssertEqual(receiver.gapsSkippedByTimeout, 1)

        let late = receiver.receive(m1, arrivedAt: t0 + .seconds(3), now: t0 + .seconds(3))

        XCTAssertEqual(late.deliver.map(\.content), ["1"], "late (out of order) rather than lost")
        XCTAssertEqual(late.receipts.map(\.messageId), [1])
        let copy = receiver.receive(m1, arrivedAt: t0 + .seconds(4), now: t0 + .seconds(4))
        XCTAssertEqual(copy.deliver, [], "a copy is a duplicate")
        XCTAssertEqual(copy.receipts.map(\.messageId), [1], "and receipted again")
        XCTAssertEqual(receiver.deliveredLate, 1)
    }

    func testAHeldMessageThatWaitedTheHoldLimitIsReleasedEvenIfALowerOneArrivedLater() {
        var receiver = ReceiverCore(holdLimit: .seconds(2))
        func message(_ seq: UInt64) -> SIMPMessage {
            var message = SIMPMessage(kind: .text, messageId: seq, fromUser: "alice", toUser: "bob", content: "\(seq)")
            (message.stream, message.seq, message.floor) = (9, seq, 1)
            return message
        }
        XCTAssertTrue(receiver.receive(message(3), arrivedAt: t0, now: t0).deliver.isEmpty)
        XCTAssertTrue(receiver.receive(message(2), arrivedAt: t0 + .seconds(1), now: t0 + .seconds(1)).deliver.isEmpty)
        let deadline = receiver.nextDeadline!
        XCTAssertEqual(deadline, t0 + .seconds(2), "seq 3 has waited longest")

        XCTAssertEqual(receiver.poll(now: deadline).deliver.map(\.content), ["2", "3"], "seq 3 waited 2 s: the gap before it is skipped")
        XCTAssertNil(receiver.nextDeadline, "nothing left that is due: the timer does not re-arm in the past")
        XCTAssertEqual(receiver.deliveredLate, 0)
    }

    func testStreamsAreSeparatePerSenderAndPerStream() {
        var receiver = ReceiverCore()
        var fromOld = SIMPMessage(kind: .text, messageId: 10, fromUser: "alice", toUser: "bob", content: "old")
        (fromOld.stream, fromOld.seq, fromOld.floor) = (1, 5, 5)
        var fromNew = SIMPMessage(kind: .text, messageId: 20, fromUser: "alice", toUser: "bob", content: "new")
        (fromNew.stream, fromNew.seq, fromNew.floor) = (2, 1, 1) // alice restarted: a new stream

        XCTAssertEqual(receiver.receive(fromOld, arrivedAt: t0, now: t0).deliver.map(\.content), ["old"])
        XCTAssertEqual(receiver.receive(fromNew, arrivedAt: t0, now: t0).deliver.map(\.content), ["new"])
    }

    /// A newer process of the sender resends from its outbox, on its own stream, a message an
    /// older process already delivered: the copy is a duplicate, and its seq on the new stream
    /// must not hold back the messages after it (it held them for the 30 s hold limit).
    func testADuplicateFromAnotherStreamDoesNotLeaveAGapInItsOwnStream() {
        let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var receiver = ReceiverCore(receiptsWhenReleased: true)
        func message(_ id: UInt64, stream: UInt64, seq: UInt64) -> SIMPMessage {
            var message = SIMPMessage(kind: .text, messageId: id, fromUser: "alice", toUser: "bob", content: "m\(id)")
            message.stream = stream
            message.seq = seq
            message.floor = 1
            return message
        }
        XCTAssertEqual(receiver.receive(message(10, stream: 10, seq: 1), arrivedAt: t0, now: t0).deliver.map(\.messageId), [10])
        // The newer process (stream 500) resends 10 as its seq 1, then sends its own 500 as seq 2.
        let copy = receiver.receive(message(10, stream: 500, seq: 1), arrivedAt: t0, now: t0)
        XCTAssertEqual(copy.verdict, .duplicate)
        XCTAssertEqual(copy.receipts.map(\.messageId), [10], "receipted again: the sender may have missed the first")
        let next = receiver.receive(message(500, stream: 500, seq: 2), arrivedAt: t0, now: t0)
        XCTAssertEqual(next.deliver.map(\.messageId), [500], "not held behind the duplicate's seq")
        XCTAssertEqual(receiver.heldCount, 0)
    }

    /// While the receiver's control connection is down no gap can be repaired: the hold limit
    /// does not count that time (a 75 s blackout must not skip a gap its sender still repairs).
    func testTheHoldLimitDoesNotCountWhileTheReceiverIsUnreachable() {
        var receiver = ReceiverCore(holdLimit: .seconds(30))
        func message(_ seq: UInt64) -> SIMPMessage {
            var message = SIMPMessage(kind: .text, messageId: seq, fromUser: "alice", toUser: "bob", content: "\(seq)")
            (message.stream, message.seq, message.floor) = (9, seq, 1)
            return message
        }
        XCTAssertTrue(receiver.receive(message(2), arrivedAt: t0, now: t0).deliver.isEmpty)
        receiver.stopHoldClock(since: t0 + .seconds(10))
        XCTAssertNil(receiver.nextDeadline, "nothing is due while unreachable")
        XCTAssertEqual(receiver.poll(now: t0 + .seconds(75)), ReceiverCore.Release())

        receiver.restartHoldClock(now: t0 + .seconds(80))
        XCTAssertEqual(receiver.nextDeadline, t0 + .seconds(100), "10 s waited before, 20 s left after")
        let repaired = receiver.receive(message(1), arrivedAt: t0 + .seconds(81), now: t0 + .seconds(81))
        XCTAssertEqual(repaired.deliver.map(\.content), ["1", "2"], "the repair after the outage is in order")
        XCTAssertEqual(receiver.gapsSkippedByTimeout, 0)
    }
}

final class OrderingFieldsCodecTests: XCTestCase {
    func testStreamSeqAndFloorRoundTripWithTheOtherFields() throws {
        var message = SIMPMessage(kind: .text, messageId: 1_795_257_795_295_278, fromUser: "alice", toUser: "bob", content: "x", time: 77)
        (message.stream, message.seq, message.floor, message.attempt) = (1_795_257_795_000_000, 12, 9, 3)
        XCTAssertEqual(try MessageCodec.decode(MessageCodec.encode(message)), message)
    }
}
