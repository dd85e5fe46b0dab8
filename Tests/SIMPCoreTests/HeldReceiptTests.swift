import NIOCore
import SIMPCore
import XCTest

/// HELD receipts (field 52, docs/PROTOCOL.md §6.1): a message held behind a gap is reported
/// arrived at once, settled only by its final receipt, so a receiver that stops while holding
/// it loses nothing.
final class HeldReceiptTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    private func submit(_ sender: inout ReliableSender, _ text: String, at now: NIODeadline) -> SIMPMessage {
        sender.submit(SIMPMessage(kind: .text, fromUser: "alice", toUser: "bob", content: text), now: now).output.transmit[0]
    }

    private func held(_ message: SIMPMessage, holdMicros: UInt32 = 0) -> SIMPMessage {
        var receipt = message.receipt(holdMicros: holdMicros)
        receipt.held = true
        return receipt
    }

    // MARK: Receiver

    func testAHeldMessageGetsAHeldReceiptOnArrivalAndForEachCopyThenItsFinalReceiptWhenReleased() {
        var sender = ReliableSender(firstMessageId: 1)
        let m1 = submit(&sender, "1", at: t0)
        let m2 = submit(&sender, "2", at: t0)
        var receiver = ReceiverCore()

        let early = receiver.receive(m2, arrivedAt: t0, now: t0)
        XCTAssertEqual(early.deliver, [])
        XCTAssertEqual(early.receipts, [held(m2)], "HELD at once: an RTT sample, nothing settled")
        let copy = receiver.receive(m2, arrivedAt: t0 + .milliseconds(5), now: t0 + .milliseconds(5))
        XCTAssertEqual(copy.receipts, [held(m2)], "a copy of a held message is answered HELD again")

        let filled = receiver.receive(m1, arrivedAt: t0 + .milliseconds(40), now: t0 + .milliseconds(40))
        XCTAssertEqual(filled.deliver.map(\.content), ["1", "2"])
        XCTAssertEqual(filled.receipts.map(\.messageId), [m1.messageId, m2.messageId])
        XCTAssertEqual(filled.receipts.map(\.held), [false, false], "final receipts")
        XCTAssertEqual(filled.receipts.map(\.holdMicros), [0, 40_000], "the final receipt's hold covers the wait")
    }

    func testWithoutReceiptsWhenReleasedNoHeldReceiptIsSent() {
        var sender = ReliableSender(firstMessageId: 1)
        _ = submit(&sender, "1", at: t0)
        let m2 = submit(&sender, "2", at: t0)
        var receiver = ReceiverCore(receiptsWhenReleased: false)
        XCTAssertEqual(receiver.receive(m2, arrivedAt: t0, now: t0).receipts, [m2.receipt(holdMicros: 0)], "as clients before HELD")
        XCTAssertEqual(receiver.receive(m2, arrivedAt: t0, now: t0).receipts, [m2.receipt(holdMicros: 0)])
    }

    func testHeldReceiptsAreNotBatched() {
        var sender = ReliableSender(firstMessageId: 1)
        let m1 = submit(&sender, "1", at: t0)
        XCTAssertFalse(ReceiptBatcher.isBatchable(held(m1)))
        XCTAssertTrue(ReceiptBatcher.isBatchable(m1.receipt(holdMicros: 0)))
    }

    // MARK: Sender

    func testAHeldReceiptIsAnRTTSampleAndFastRetransmitsTheGapButSettlesNothing() {
        var sender = ReliableSender(firstMessageId: 1)
        let m1 = submit(&sender, "1", at: t0 - .milliseconds(2))
        let m2 = submit(&sender, "2", at: t0)
        let m3 = submit(&sender, "3", at: t0)

        let first = sender.handleReceipt(held(m2), now: t0 + .milliseconds(60))
        XCTAssertEqual(first.events, [], "not delivered: the receiver's application does not have it")
        XCTAssertTrue(sender.isPending(m2.messageId))
        XCTAssertEqual(sender.estimator.sampleCount, 1)
        XCTAssertEqual(sender.estimator.smoothedRTT, .milliseconds(60))

        let second = sender.handleReceipt(held(m3), now: t0 + .milliseconds(61))
        XCTAssertEqual(second.transmit.map(\.messageId), [m1.messageId, m1.messageId], "overtaken twice: the gap is repaired now")
        XCTAssertEqual(sender.fastRetransmits, 1)

        let rushed = sender.poll(now: t0 + .seconds(1)).transmit.map(\.messageId)
        XCTAssertEqual(Set(rushed), [m1.messageId], "only the unanswered message is rushed; the held ones are not")
        let repaired = sender.handleReceipt(m1.receipt(holdMicros: 0), now: t0 + .milliseconds(1100))
        XCTAssertEqual(repaired.events.count, 1)
        let m4 = submit(&sender, "4", at: t0 + .milliseconds(1100))
        XCTAssertEqual(m4.floor, 2, "seq 2 is held, not delivered: the floor stays at it")

        let final = sender.handleReceipt(m2.receipt(holdMicros: 1_040_000), now: t0 + .milliseconds(1110))
        guard case .delivered(m2.messageId, "bob", _, 1)? = final.events.first else { return XCTFail("\(final.events)") }
        XCTAssertEqual(sender.estimator.sampleCount, 3, "the final receipt of an answered transmission is no second sample")
        XCTAssertFalse(sender.isPending(m2.messageId))
        XCTAssertEqual(
            sender.poll(now: t0 + .milliseconds(1500)).transmit.map(\.messageId).filter { $0 == m3.messageId }, [],
            "m3's final receipt is due any moment: not sent again before an RTO")
    }

    /// The receiver restarted while holding a message: once the gap before it is repaired, its
    /// final receipt would come within a round trip; without it, it is sent again after an RTO.
    func testOnceTheGapIsRepairedAHeldMessageWithoutItsFinalReceiptIsSentAgainAfterAnRTO() {
        var sender = ReliableSender(firstMessageId: 1)
        let m1 = submit(&sender, "1", at: t0)
        let m2 = submit(&sender, "2", at: t0 + .milliseconds(1))
        _ = sender.handleReceipt(held(m2), now: t0 + .milliseconds(50))
        _ = sender.handleReceipt(m1.receipt(holdMicros: 0), now: t0 + .milliseconds(100))
        let due = t0 + .milliseconds(100) + sender.estimator.rto
        XCTAssertEqual(sender.nextDeadline, due)
        XCTAssertEqual(sender.poll(now: due).transmit.map(\.messageId), [m2.messageId], "one copy")
        XCTAssertEqual(sender.poll(now: due + .seconds(9)).transmit, [], "then slowly again")
    }

    func testAHeldMessageIsSentAgainEveryMaximumRTOUntilItsFinalReceipt() {
        var sender = ReliableSender(firstMessageId: 1)
        _ = submit(&sender, "1", at: t0)
        let m2 = submit(&sender, "2", at: t0)
        _ = sender.handleReceipt(held(m2), now: t0 + .milliseconds(50))
        let maximum = sender.policy.maximumRTO

        XCTAssertFalse(sender.poll(now: t0 + maximum - .milliseconds(1)).transmit.contains { $0.messageId == m2.messageId })
        let again = sender.poll(now: t0 + maximum).transmit.filter { $0.messageId == m2.messageId }
        XCTAssertEqual(again.map(\.attempt), [2], "one copy, for a receiver that may have restarted")
        XCTAssertEqual(sender.poll(now: t0 + maximum * 2).transmit.filter { $0.messageId == m2.messageId }.map(\.attempt), [3])

        let final = sender.handleReceipt(m2.receipt(holdMicros: 0), now: t0 + maximum * 2 + .milliseconds(40))
        guard case .delivered(m2.messageId, "bob", _, 3)? = final.events.first else { return XCTFail("\(final.events)") }
    }

    func testAHeldMessageWithoutAFinalReceiptFailsAtItsGiveUpTime() {
        var policy = RetransmitPolicy()
        policy.giveUpAfter = .seconds(60)
        var sender = ReliableSender(firstMessageId: 1, policy: policy)
        let m1 = submit(&sender, "1", at: t0)
        _ = sender.handleReceipt(held(m1), now: t0 + .milliseconds(50))

        var now = t0, transmissions = 1
        var failure: SenderEvent?
        while failure == nil, now < t0 + .seconds(200), let next = sender.nextDeadline {
            now = next
            let output = sender.poll(now: now)
            transmissions += output.transmit.count
            failure = output.events.first
        }
        guard case .failed(m1.messageId, "bob", .expired(after: .seconds(60), _))? = failure else { return XCTFail("\(String(describing: failure))") }
        XCTAssertGreaterThanOrEqual(now, t0 + .seconds(60), "never before its time")
        XCTAssertLessThanOrEqual(now, t0 + .seconds(60) + policy.maximumRTO * 2)
        XCTAssertLessThanOrEqual(transmissions, 9, "sent slowly meanwhile: about one per maximum RTO")
    }

    func testABatchWithHeldSettlesNoneOfItsIds() {
        var sender = ReliableSender(firstMessageId: 1)
        let m1 = submit(&sender, "1", at: t0)
        let m2 = submit(&sender, "2", at: t0)
        var batch = held(m2)
        batch.receiptIds = [m1.messageId]
        XCTAssertEqual(sender.handleReceipt(batch, now: t0 + .milliseconds(50)).events, [])
        XCTAssertTrue(sender.isPending(m1.messageId) && sender.isPending(m2.messageId))
    }
}
