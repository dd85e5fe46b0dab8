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

        // Timers are 10 s apart by now: the first one past the limit starts a last chance of
        // 10 s (one more transmission), the next one fails it.
        let after = run(&sender, until: t0 + .seconds(141))
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

        let events = run(&sender, until: t0 + .seconds(45)).events

        XCTAssertEqual(
            events,
            [
                .failed(messageId: second, to: "bob", .expired(after: .seconds(30), attempts: 0)),
                .failed(messageId: first, to: "bob", .expired(after: .seconds(30), attempts: events.last.flatMap(Self.attempts) ?? -1)),
            ], "the waiting one fails at its time; the one in flight when its last transmission goes unanswered")
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

    /// blackout-75s seed 105: a message first sent just before its time limit, whose receipt
    /// takes longer than the (small) RTO of a quiet path, was failed and then delivered. The last
    /// transmission of a message past its limit gets `maximumRTO` to be answered.
    func testAMessageSentJustBeforeItsTimeLimitHasTimeToBeAnswered() {
        var sender = ReliableSender(firstMessageId: 1, policy: policy(giveUpAfter: .seconds(10), maxIdSpan: 1))
        let first = sender.submit(text("first"), now: t0).messageId
        let second = sender.submit(text("second"), now: t0).messageId // waits: the window holds one
        let early = run(&sender, until: t0 + .milliseconds(9_900))
        XCTAssertEqual(early.events, [])
        var receipt = text("first").receipt(holdMicros: 0)
        receipt.messageId = first
        receipt.attempt = UInt32(1 + early.sent) // answers the latest transmission …
        let latestSent = t0 + .seconds(7) // … sent at 7 s (timeouts 1, 2, 4 s from 0 s), held 2.85 s: a 50 ms RTT sample
        receipt.holdMicros = UInt32((t0 + .milliseconds(9_900) - latestSent - .milliseconds(50)).nanoseconds / 1000)
        let released = sender.handleReceipt(receipt, now: t0 + .milliseconds(9_900))
        XCTAssertEqual(released.transmit.map(\.messageId), [second], "sent 0.1 s before its time limit")
        XCTAssertEqual(sender.estimator.rto, .milliseconds(150))

        let meanwhile = run(&sender, until: t0 + .milliseconds(10_800)) // its RTO timer fires at 10.05 s
        XCTAssertEqual(meanwhile.events, [], "not failed while its transmission may still be answered")
        var late = text("second").receipt(holdMicros: 0)
        late.messageId = second
        late.attempt = 1
        let answered = sender.handleReceipt(late, now: t0 + .milliseconds(10_800))
        guard case .delivered(second, _, _, _)? = answered.events.first else { return XCTFail("\(answered.events)") }
    }

    /// INBOX_FULL for a message still pending: the receiver's log did not take it. Not a failure:
    /// it is sent again as usual (stored or receipted later), and if its time limit passes first it
    /// fails with that refusal as the reason (docs/PROTOCOL.md §6.2, §6.6).
    func testAMessageAFullInboxRefusedIsRetriedAndFailsOnlyAtItsTimeLimit() {
        var sender = ReliableSender(firstMessageId: 1, policy: policy(giveUpAfter: .seconds(60)))
        let retried = sender.submit(text("a"), now: t0).messageId
        let lapsed = sender.submit(text("b"), now: t0).messageId
        XCTAssertTrue(sender.refusedAsFull(messageId: retried, reason: "bob's inbox is full; try again later"))
        XCTAssertTrue(sender.refusedAsFull(messageId: lapsed, reason: "bob's inbox is full; try again later"))
        XCTAssertFalse(sender.refusedAsFull(messageId: 99, reason: "?"), "not pending: nothing to do")

        let meanwhile = run(&sender, until: t0 + .seconds(30))
        XCTAssertEqual(meanwhile.events, [], "a refusal is no failure")
        XCTAssertGreaterThan(meanwhile.sent, 4, "both are sent again")
        let stored = SIMPMessage(kind: .receipt, messageId: retried, fromUser: "bob", toUser: "alice")
        XCTAssertEqual(sender.handleStored(stored, now: t0 + .seconds(31)).events.count, 1, "stored on a later try")

        let end = run(&sender, until: t0 + .seconds(120))
        XCTAssertEqual(
            end.events, [.failed(messageId: lapsed, to: "bob", .rejected(.inboxFull, "bob's inbox is full; try again later"))],
            "the other fails at its time limit, with the refusal as its reason")
    }
}

final class GiveUpWhileDownTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    func testAMessageSentWhileThePathWorkedIsAskedOnceMoreAfterTheReconnectBeforeItFails() {
        var policy = RetransmitPolicy()
        policy.giveUpAfter = .seconds(60)
        var sender = ReliableSender(firstMessageId: 1, policy: policy)
        var first = sender.submit(SIMPMessage(kind: .text, fromUser: "alice", toUser: "bob", content: "a"), now: t0).output.transmit[0]
        first.attempt = 1
        _ = sender.handleReceipt(first.receipt(holdMicros: 0), now: t0 + .milliseconds(40)) // the path works
        let reached = sender.submit(SIMPMessage(kind: .text, fromUser: "alice", toUser: "bob", content: "b"), now: t0 + .milliseconds(50))
        let never = sender.submit(SIMPMessage(kind: .text, fromUser: "alice", toUser: "bob", content: "c"), now: t0 + .seconds(5))
        sender.suspend() // the path broke: b's receipt, if any, was lost

        var down: [SenderEvent] = []
        while let deadline = sender.nextDeadline, deadline <= t0 + .seconds(90) { down += sender.poll(now: deadline).events }
        XCTAssertEqual(down.map(Self.id), [never.messageId], "c was sent after the path broke: it fails at its time")

        let resumed = sender.resume(now: t0 + .seconds(90))
        XCTAssertEqual(resumed.transmit.map(\.content), ["b"], "b is asked once more")
        var receipt = resumed.transmit[0]
        receipt.fromUser = "alice"
        XCTAssertEqual(
            sender.handleReceipt(receipt.receipt(holdMicros: 0), now: t0 + .seconds(90) + .milliseconds(40)).events.map(Self.id),
            [reached.messageId], "and it was delivered after all")
    }

    private static func id(_ event: SenderEvent) -> UInt64 {
        switch event {
        case .delivered(let id, _, _, _), .failed(let id, _, _): return id
        }
    }
}
