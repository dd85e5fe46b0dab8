import NIOCore
import SIMPCore
import XCTest

/// Give-up is a time, not a count; overflow waits; the application hears of delay, and of
/// failure only when the time limit passes.
final class GiveUpTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    private func text(_ content: String = "hi") -> SIMPMessage {
        SIMPMessage(kind: .text, fromUser: "alice", toUser: "bob", content: content)
    }

    private func policy(giveUpAfter: TimeAmount = .seconds(120), maxIdSpan: UInt64 = 1024) -> RetransmitPolicy {
        var policy = RetransmitPolicy()
        policy.retransmissionCopies = 1
        policy.giveUpAfter = giveUpAfter
        policy.maxIdSpan = maxIdSpan
        return policy
    }

    /// Polls at every deadline until `end`, collecting events and transmissions.
    private func run(_ sender: inout ReliableSender, until end: NIODeadline) -> (events: [SenderEvent], sent: Int, delayed: [DelayedMessage]) {
        var result: (events: [SenderEvent], sent: Int, delayed: [DelayedMessage]) = ([], 0, [])
        while let deadline = sender.nextDeadline, deadline <= end {
            let output = sender.poll(now: deadline)
            result.events += output.events
            result.sent += output.transmit.count
            result.delayed += output.delayed
        }
        return result
    }

    func testAMessageIsRetransmittedUntilTheTimeLimitNotACount() {
        var sender = ReliableSender(firstMessageId: 1, policy: policy(giveUpAfter: .seconds(120)))
        let id = sender.submit(text(), now: t0).messageId

        let before = run(&sender, until: t0 + .seconds(119))
        XCTAssertEqual(before.events, [], "nothing fails before the time limit")
        XCTAssertGreaterThan(before.sent, 9, "more transmissions than the old count of 9")
        XCTAssertTrue(sender.isPending(id))

        let after = run(&sender, until: t0 + .seconds(121))
        let attempts = 1 + before.sent + after.sent
        XCTAssertEqual(after.events, [.failed(messageId: id, to: "bob", .expired(after: .seconds(120), attempts: attempts))])
        XCTAssertEqual(run(&sender, until: t0 + .seconds(3600)).sent, 0, "nothing more")
    }

    func testTheTimeLimitPassesWhileSuspendedToo() {
        var sender = ReliableSender(firstMessageId: 1, policy: policy(giveUpAfter: .seconds(60)))
        let id = sender.submit(text(), now: t0).messageId
        sender.suspend()

        XCTAssertEqual(sender.nextDeadline, t0 + .seconds(5), "the delay notice, then the give-up time")
        let outcome = run(&sender, until: t0 + .seconds(61))

        XCTAssertEqual(outcome.sent, 0, "nothing is sent while suspended")
        XCTAssertEqual(outcome.delayed.map(\.messageId), [id])
        XCTAssertEqual(outcome.events, [.failed(messageId: id, to: "bob", .expired(after: .seconds(60), attempts: 1))])
    }

    func testMessagesBeyondTheWindowWaitInOrderAndDoNotFail() {
        var sender = ReliableSender(firstMessageId: 1, policy: policy(maxIdSpan: 2))
        let ids = (0..<5).map { sender.submit(text("\($0)"), now: t0 + .milliseconds(Int64($0))).messageId }
        XCTAssertEqual(sender.inFlightCount, 2)
        XCTAssertEqual(sender.waitingCount, 3)

        let outage = run(&sender, until: t0 + .seconds(100))
        XCTAssertEqual(outage.events, [], "a long outage fails nothing before the time limit")
        XCTAssertEqual(outage.delayed.map(\.messageId), ids, "each is reported delayed once, waiting ones included")

        var released: [UInt64] = []
        for id in ids {
            var receipt = SIMPMessage(kind: .text, messageId: id, fromUser: "alice", toUser: "bob")
            receipt.attempt = 1
            released += sender.handleReceipt(receipt.receipt(holdMicros: 0), now: t0 + .seconds(101)).transmit.map(\.messageId)
        }
        XCTAssertEqual(released, Array(ids[2...]), "the waiting ones went out in order as room opened")
        XCTAssertEqual(run(&sender, until: t0 + .seconds(1000)).events, [])
    }

    func testAWaitingMessageExpiresToo() {
        var sender = ReliableSender(firstMessageId: 1, policy: policy(giveUpAfter: .seconds(30), maxIdSpan: 1))
        let first = sender.submit(text("a"), now: t0).messageId
        let second = sender.submit(text("b"), now: t0 + .seconds(1)).messageId

        let events = run(&sender, until: t0 + .seconds(32)).events

        XCTAssertEqual(events, [
            .failed(messageId: first, to: "bob", .expired(after: .seconds(30), attempts: events.first.flatMap(Self.attempts) ?? -1)),
            .failed(messageId: second, to: "bob", .expired(after: .seconds(30), attempts: 1)),
        ], "the second went out once the first failed, then ran out of time itself")
    }

    private static func attempts(_ event: SenderEvent) -> Int? {
        guard case .failed(_, _, .expired(_, let attempts)) = event else { return nil }
        return attempts
    }

    func testTheRelayChargesAMessageOnce() {
        var limiter = MessageRateLimiter<String>(RateLimit(perSecond: 1, burst: 2))
        XCTAssertNil(limiter.admit("alice", messageId: 100, now: t0))
        XCTAssertNil(limiter.admit("alice", messageId: 101, now: t0))
        XCTAssertNotNil(limiter.admit("alice", messageId: 102, now: t0), "a third new message is over the burst")
        for _ in 0..<50 {
            XCTAssertNil(limiter.admit("alice", messageId: 100, now: t0), "retransmissions of admitted messages pass")
            XCTAssertNil(limiter.admit("alice", messageId: 101, now: t0))
        }
        XCTAssertNotNil(limiter.admit("alice", messageId: 102, now: t0), "a refused message is charged when it comes again")
        XCTAssertNil(limiter.admit("alice", messageId: 102, now: t0 + .seconds(1)))
    }
}
