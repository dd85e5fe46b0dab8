import NIOCore
import SIMPCore
import XCTest

/// Fast retransmit: a message overtaken by receipts for later messages to the same receiver
/// is sent again without waiting for its timer.
final class FastRetransmitTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    private func text(to user: String = "bob") -> SIMPMessage {
        SIMPMessage(kind: .text, fromUser: "alice", toUser: user, content: "hi")
    }

    private func receipt(for id: UInt64, attempt: UInt32 = 1, to user: String = "bob") -> SIMPMessage {
        var message = SIMPMessage(kind: .text, messageId: id, fromUser: "alice", toUser: user)
        message.attempt = attempt
        return message.receipt(holdMicros: 0)
    }

    private func ms(_ value: Int64) -> NIODeadline { t0 + .milliseconds(value) }

    /// Sends one message per entry of `receivers`, 10 ms apart; returns their ids.
    private func submit(_ sender: inout ReliableSender, to receivers: [String]) -> [UInt64] {
        receivers.enumerated().map { index, user in sender.submit(text(to: user), now: ms(Int64(index) * 10)).messageId }
    }

    func testTwoLaterReceiptsResendTheOvertakenMessageAtOnce() {
        var sender = ReliableSender(firstMessageId: 1, policy: .oneCopy)
        let ids = submit(&sender, to: ["bob", "bob", "bob"])
        XCTAssertEqual(sender.handleReceipt(receipt(for: ids[1]), now: ms(60)).transmit, [])
        let output = sender.handleReceipt(receipt(for: ids[2]), now: ms(70))
        XCTAssertEqual(output.transmit.map(\.messageId), [ids[0]])
        XCTAssertEqual(output.transmit.first?.attempt, 2)
        XCTAssertEqual(sender.retransmits, 1)
        XCTAssertEqual(sender.fastRetransmits, 1)
        // The retransmission re-armed the timer from now.
        XCTAssertGreaterThan(sender.nextDeadline!, ms(70))
    }

    func testReceiptsFromAnotherReceiverDoNotCount() {
        var sender = ReliableSender(firstMessageId: 1, policy: .oneCopy)
        let ids = submit(&sender, to: ["bob", "carol", "carol"])
        XCTAssertEqual(sender.handleReceipt(receipt(for: ids[1], to: "carol"), now: ms(60)).transmit, [])
        XCTAssertEqual(sender.handleReceipt(receipt(for: ids[2], to: "carol"), now: ms(70)).transmit, [])
        XCTAssertEqual(sender.fastRetransmits, 0)
    }

    func testOnlyMessagesSentAfterTheLatestTransmissionOvertake() {
        var sender = ReliableSender(firstMessageId: 1, policy: .oneCopy)
        let ids = submit(&sender, to: ["bob", "bob", "bob"])
        // The first message times out and is retransmitted after the other two were sent.
        let deadline = sender.nextDeadline!
        XCTAssertEqual(sender.poll(now: deadline).transmit.map(\.messageId), [ids[0]])
        XCTAssertEqual(sender.handleReceipt(receipt(for: ids[1]), now: deadline + .milliseconds(1)).transmit, [])
        XCTAssertEqual(sender.handleReceipt(receipt(for: ids[2]), now: deadline + .milliseconds(2)).transmit, [])
        XCTAssertEqual(sender.fastRetransmits, 0)
    }

    func testThresholdZeroTurnsItOff() {
        var policy = RetransmitPolicy.oneCopy
        policy.fastRetransmitThreshold = 0
        var sender = ReliableSender(firstMessageId: 1, policy: policy)
        let ids = submit(&sender, to: ["bob", "bob", "bob", "bob"])
        for (offset, id) in ids.dropFirst().enumerated() {
            XCTAssertEqual(sender.handleReceipt(receipt(for: id), now: ms(60 + Int64(offset))).transmit, [])
        }
    }

    func testLateReceiptForTheFirstTransmissionCountsTheFastRetransmitAsSpurious() {
        var sender = ReliableSender(firstMessageId: 1, policy: .oneCopy)
        let ids = submit(&sender, to: ["bob", "bob", "bob"])
        _ = sender.handleReceipt(receipt(for: ids[1]), now: ms(60))
        _ = sender.handleReceipt(receipt(for: ids[2]), now: ms(70))
        let output = sender.handleReceipt(receipt(for: ids[0], attempt: 1), now: ms(75))
        XCTAssertEqual(output.events.count, 1)
        XCTAssertEqual(sender.spuriousRetransmits, 1)
    }

    func testNoFastRetransmitBeyondMaxAttempts() {
        var policy = RetransmitPolicy.oneCopy
        policy.maxAttempts = 1
        var sender = ReliableSender(firstMessageId: 1, policy: policy)
        let ids = submit(&sender, to: ["bob", "bob", "bob"])
        _ = sender.handleReceipt(receipt(for: ids[1]), now: ms(60))
        XCTAssertEqual(sender.handleReceipt(receipt(for: ids[2]), now: ms(70)).transmit, [])
    }
}
