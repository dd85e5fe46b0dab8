import NIOCore
import SIMPCore
import XCTest

final class ReliableSenderTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    private func text(_ content: String = "hi") -> SIMPMessage {
        SIMPMessage(kind: .text, fromUser: "alice", toUser: "bob", content: content)
    }

    private func receipt(for id: UInt64, attempt: UInt32, holdMicros: UInt32 = 0) -> SIMPMessage {
        var message = SIMPMessage(kind: .text, messageId: id, fromUser: "alice", toUser: "bob")
        message.attempt = attempt
        return message.receipt(holdMicros: holdMicros)
    }

    private func policy(maxAttempts: Int = 8, maxIdSpan: UInt64 = 1024) -> RetransmitPolicy {
        var policy = RetransmitPolicy.oneCopy
        policy.maxAttempts = maxAttempts
        policy.maxIdSpan = maxIdSpan
        return policy
    }

    func testSubmitTransmitsOnceWithAttemptOneAndAnId() {
        var sender = ReliableSender(firstMessageId: 100, policy: .oneCopy)
        let (id, output) = sender.submit(text("hello"), now: t0)
        XCTAssertEqual(id, 100)
        XCTAssertEqual(output.transmit.count, 1)
        XCTAssertEqual(output.transmit.first?.messageId, 100)
        XCTAssertEqual(output.transmit.first?.attempt, 1)
        XCTAssertEqual(output.transmit.first?.content, "hello")
        XCTAssertEqual(output.events, [])
        XCTAssertEqual(sender.inFlightCount, 1)
        XCTAssertEqual(sender.nextDeadline, t0 + .seconds(1))
    }

    func testIdsIncrease() {
        var sender = ReliableSender(firstMessageId: 100, policy: .oneCopy)
        let ids = (0..<3).map { _ in sender.submit(text(), now: t0).messageId }
        XCTAssertEqual(ids, [100, 101, 102])
        var fromZero = ReliableSender(firstMessageId: 0, policy: .oneCopy)
        XCTAssertEqual(fromZero.submit(text(), now: t0).messageId, 1)
    }

    func testRetransmitsAtDeadlineWithDoublingBackoff() {
        var policy = RetransmitPolicy.oneCopy
        policy.delayNoticeAfter = .hours(1) // only retransmissions in the way
        var sender = ReliableSender(firstMessageId: 1, policy: policy)
        let id = sender.submit(text(), now: t0).messageId
        XCTAssertEqual(sender.poll(now: t0 + .seconds(1) - .nanoseconds(1)), SenderOutput())

        var now = t0
        let expectedIntervals: [TimeAmount] = [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(10), .seconds(10), .seconds(10)]
        for (index, interval) in expectedIntervals.enumerated() {
            let deadline = sender.nextDeadline!
            XCTAssertEqual(deadline - now, interval, "interval after attempt \(index + 1)")
            now = deadline
            let output = sender.poll(now: now)
            XCTAssertEqual(output.transmit.map(\.messageId), [id])
            XCTAssertEqual(output.transmit.first?.attempt, UInt32(index + 2))
        }
        XCTAssertEqual(sender.retransmits, 7)
    }

    func testGivesUpAfterMaxAttemptsExactlyOnce() {
        var sender = ReliableSender(firstMessageId: 5, policy: policy(maxAttempts: 3))
        var transmissions = sender.submit(text(), now: t0).output.transmit.count
        var events: [SenderEvent] = []
        var now = t0
        while let deadline = sender.nextDeadline {
            now = deadline
            let output = sender.poll(now: now)
            transmissions += output.transmit.count
            events += output.events
        }
        XCTAssertEqual(transmissions, 3)
        XCTAssertEqual(events, [.failed(messageId: 5, to: "bob", .timedOut(attempts: 3))])
        XCTAssertEqual(sender.inFlightCount, 0)
        XCTAssertEqual(sender.poll(now: now + .seconds(3600)), SenderOutput())
    }

    func testReceiptDeliversAndStopsRetransmission() {
        var sender = ReliableSender(firstMessageId: 1, policy: .oneCopy)
        let id = sender.submit(text(), now: t0).messageId
        XCTAssertEqual(sender.poll(now: t0 + .seconds(1)).transmit.count, 1)
        let output = sender.handleReceipt(receipt(for: id, attempt: 2), now: t0 + .milliseconds(1500))
        XCTAssertEqual(output.events, [.delivered(messageId: id, to: "bob", latency: .milliseconds(1500), attempts: 2)])
        XCTAssertEqual(output.transmit, [])
        XCTAssertFalse(sender.isPending(id))
        XCTAssertEqual(sender.poll(now: t0 + .seconds(60)), SenderOutput())
    }

    func testDuplicateReceiptYieldsNothing() {
        var sender = ReliableSender(firstMessageId: 1, policy: .oneCopy)
        let id = sender.submit(text(), now: t0).messageId
        XCTAssertEqual(sender.handleReceipt(receipt(for: id, attempt: 1), now: t0 + .milliseconds(80)).events.count, 1)
        XCTAssertEqual(sender.handleReceipt(receipt(for: id, attempt: 1), now: t0 + .milliseconds(90)), SenderOutput())
        XCTAssertEqual(sender.estimator.sampleCount, 1)
    }

    func testReceiptForEarlierAttemptIsSampledFromThatAttempt() {
        var sender = ReliableSender(firstMessageId: 1, policy: .oneCopy)
        let id = sender.submit(text(), now: t0).messageId
        let rto = sender.estimator.rto
        XCTAssertEqual(sender.poll(now: t0 + rto).transmit.first?.attempt, 2)
        _ = sender.handleReceipt(receipt(for: id, attempt: 1), now: t0 + rto + .milliseconds(200))
        XCTAssertEqual(sender.estimator.smoothedRTT, rto + .milliseconds(200))
        XCTAssertEqual(sender.spuriousRetransmits, 1)
    }

    func testReceiptForLatestAttemptIsSampledFromItsSend() {
        var sender = ReliableSender(firstMessageId: 1, policy: .oneCopy)
        let id = sender.submit(text(), now: t0).messageId
        let rto = sender.estimator.rto
        _ = sender.poll(now: t0 + rto)
        _ = sender.handleReceipt(receipt(for: id, attempt: 2), now: t0 + rto + .milliseconds(200))
        XCTAssertEqual(sender.estimator.smoothedRTT, .milliseconds(200))
        XCTAssertEqual(sender.spuriousRetransmits, 0)
    }

    func testHoldTimeIsSubtractedFromSample() {
        var sender = ReliableSender(firstMessageId: 1, policy: .oneCopy)
        let id = sender.submit(text(), now: t0).messageId
        let output = sender.handleReceipt(receipt(for: id, attempt: 1, holdMicros: 100_000), now: t0 + .milliseconds(300))
        XCTAssertEqual(sender.estimator.smoothedRTT, .milliseconds(200))
        // Latency is what the user waited, hold included.
        XCTAssertEqual(output.events, [.delivered(messageId: id, to: "bob", latency: .milliseconds(300), attempts: 1)])
    }

    func testRejectionFailsWithoutRetries() {
        var sender = ReliableSender(firstMessageId: 1, policy: .oneCopy)
        let id = sender.submit(text(), now: t0).messageId
        let output = sender.handleRejection(messageId: id, code: .unknownRecipient, reason: "no bob", now: t0 + .milliseconds(10))
        XCTAssertEqual(output.events, [.failed(messageId: id, to: "bob", .rejected(.unknownRecipient, "no bob"))])
        XCTAssertEqual(sender.inFlightCount, 0)
        XCTAssertEqual(sender.poll(now: t0 + .seconds(60)), SenderOutput())
    }

    func testIdSpanHoldsMessagesBackUntilOldestIsReceipted() {
        var sender = ReliableSender(firstMessageId: 1, policy: policy(maxIdSpan: 2))
        XCTAssertEqual(sender.submit(text("a"), now: t0).output.transmit.count, 1)
        XCTAssertEqual(sender.submit(text("b"), now: t0).output.transmit.count, 1)
        let (third, held) = sender.submit(text("c"), now: t0)
        XCTAssertEqual(held.transmit, [])
        XCTAssertEqual(sender.waitingCount, 1)
        XCTAssertEqual(sender.inFlightCount, 2)

        // Receipting a newer message does not move the window.
        XCTAssertEqual(sender.handleReceipt(receipt(for: 2, attempt: 1), now: t0 + .milliseconds(50)).transmit, [])
        XCTAssertEqual(sender.waitingCount, 1)

        let released = sender.handleReceipt(receipt(for: 1, attempt: 1), now: t0 + .milliseconds(60))
        XCTAssertEqual(released.transmit.map(\.messageId), [third])
        XCTAssertEqual(released.transmit.first?.attempt, 1)
        XCTAssertEqual(released.transmit.first?.content, "c")
        XCTAssertEqual(sender.waitingCount, 0)
    }

    func testRetransmitAllResendsEveryPendingMessage() {
        var sender = ReliableSender(firstMessageId: 1, policy: .oneCopy)
        let ids = (0..<3).map { _ in sender.submit(text(), now: t0).messageId }
        // Dropped without an RTT sample, so the RTO stays at the initial 1 s.
        _ = sender.handleRejection(messageId: ids[1], code: .unknownRecipient, reason: "", now: t0 + .milliseconds(50))
        let now = t0 + .milliseconds(100)
        let output = sender.retransmitAll(now: now)
        XCTAssertEqual(output.transmit.map(\.messageId), [ids[0], ids[2]])
        XCTAssertEqual(output.transmit.map(\.attempt), [2, 2])
        XCTAssertEqual(sender.retransmits, 2)
        // The first sends' timers are superseded: the next expiry is attempt 2's.
        XCTAssertEqual(sender.poll(now: t0 + .seconds(1)), SenderOutput())
        XCTAssertEqual(sender.nextDeadline, now + .seconds(2))
    }
}

extension RetransmitPolicy {
    /// The default policy with single-copy retransmissions, for tests of the timers themselves.
    static var oneCopy: RetransmitPolicy {
        var policy = RetransmitPolicy()
        policy.retransmissionCopies = 1
        return policy
    }
}

final class RetransmissionCopiesTests: XCTestCase {
    func testRetransmissionsGoOutTwiceAndFirstTransmissionsAndResumesOnce() {
        let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var sender = ReliableSender(firstMessageId: 1)
        XCTAssertEqual(sender.submit(SIMPMessage(kind: .text, toUser: "bob"), now: t0).output.transmit.map(\.attempt), [1])
        XCTAssertEqual(sender.poll(now: t0 + .seconds(2)).transmit.map(\.attempt), [2, 2], "a timeout: two copies")
        XCTAssertEqual(sender.retransmits, 1)
        XCTAssertEqual(sender.extraCopiesSent, 1)
        sender.suspend()
        XCTAssertEqual(sender.resume(now: t0 + .seconds(3)).transmit.map(\.attempt), [3], "after a reconnect: one")
    }
}
