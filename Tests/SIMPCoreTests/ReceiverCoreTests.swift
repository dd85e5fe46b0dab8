import NIOCore
import SIMPCore
import XCTest

final class ReceiverCoreTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(5_000_000_000)

    private func text(_ id: UInt64, from: String = "alice", attempt: UInt32 = 1) -> SIMPMessage {
        var message = SIMPMessage(kind: .text, messageId: id, fromUser: from, toUser: "bob", content: "hi")
        message.attempt = attempt
        return message
    }

    func testDuplicatesAreReceiptedButDeliveredOnce() {
        var receiver = ReceiverCore()
        let first = receiver.receive(text(7), arrivedAt: t0, now: t0)
        let again = receiver.receive(text(7, attempt: 2), arrivedAt: t0 + .seconds(1), now: t0 + .seconds(1))
        XCTAssertEqual(first.deliver.count, 1)
        XCTAssertEqual(first.verdict, .deliver)
        XCTAssertTrue(again.deliver.isEmpty)
        XCTAssertEqual(again.verdict, .duplicate)
        XCTAssertEqual(again.receipts.map(\.kind), [.receipt], "delivered before: receipted again")
        XCTAssertEqual(again.receipts.first?.messageId, 7)
        XCTAssertEqual(again.receipts.first?.attempt, 2)
        XCTAssertEqual(receiver.suppressed, 1)
    }

    func testReceiptEchoesIdAndAttemptAndSwapsUsers() {
        var receiver = ReceiverCore()
        let outcome = receiver.receive(text(42, attempt: 3), arrivedAt: t0, now: t0 + .microseconds(1500) + .nanoseconds(999))
        let receipt = outcome.receipts[0]
        XCTAssertEqual(receipt.kind, .receipt)
        XCTAssertEqual(receipt.messageId, 42)
        XCTAssertEqual(receipt.attempt, 3)
        XCTAssertEqual(receipt.fromUser, "bob")
        XCTAssertEqual(receipt.toUser, "alice")
        XCTAssertEqual(receipt.holdMicros, 1500)
    }

    func testHoldTimeIsClampedToUInt32() {
        var receiver = ReceiverCore()
        XCTAssertEqual(receiver.receive(text(1), arrivedAt: t0, now: t0 - .seconds(1)).receipts.first?.holdMicros, 0)
        XCTAssertEqual(receiver.receive(text(2), arrivedAt: t0, now: t0 + .hours(2)).receipts.first?.holdMicros, UInt32.max)
    }

    func testSeparateSendersHaveSeparateWindows() {
        var receiver = ReceiverCore()
        XCTAssertEqual(receiver.receive(text(7, from: "alice"), arrivedAt: t0, now: t0).deliver.count, 1)
        XCTAssertEqual(receiver.receive(text(7, from: "carol"), arrivedAt: t0, now: t0).deliver.count, 1)
        XCTAssertTrue(receiver.receive(text(7, from: "alice"), arrivedAt: t0, now: t0).deliver.isEmpty)
        XCTAssertTrue(receiver.receive(text(7, from: "carol"), arrivedAt: t0, now: t0).deliver.isEmpty)
        XCTAssertEqual(receiver.suppressed, 2)
    }
}

final class ReceiverSkipTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    private func copy(_ seq: UInt64, floor: UInt64) -> SIMPMessage {
        var message = SIMPMessage(kind: .text, messageId: seq, fromUser: "#lobby", toUser: "bob", content: "\(seq)")
        message.stream = 1
        message.seq = seq
        message.floor = floor
        return message
    }

    func testASkippedSeqNoLongerHoldsLaterOnesBack() {
        var receiver = ReceiverCore()
        XCTAssertEqual(receiver.receive(copy(1, floor: 1), arrivedAt: t0, now: t0).deliver.map(\.seq), [1])
        XCTAssertEqual(receiver.receive(copy(3, floor: 1), arrivedAt: t0, now: t0).deliver, [], "2 might still come")

        XCTAssertEqual(receiver.skip(2, from: "#lobby", stream: 1, now: t0).deliver.map(\.seq), [3], "2 was this user's own post")
        XCTAssertEqual(receiver.skip(5, from: "#lobby", stream: 1, now: t0).deliver, [])
        XCTAssertEqual(receiver.receive(copy(6, floor: 4), arrivedAt: t0, now: t0).deliver, [], "4 might still come")
        XCTAssertEqual(receiver.receive(copy(4, floor: 4), arrivedAt: t0, now: t0).deliver.map(\.seq), [4, 6], "5 skipped in advance")
        XCTAssertEqual(receiver.gapsSkippedByTimeout, 0)
    }
}
