import DequeModule
import HeapModule
import NIOCore

/// The sending half of SIMP's reliability: retransmits each content message until its receipt
/// arrives or `RetransmitPolicy.giveUpAfter` has passed since it was submitted, and says which
/// happened. Messages beyond the id window wait in order; nothing fails for lack of room.
///
/// Sans-I/O: every call takes the current time, returns what to send, and `nextDeadline` tells
/// the caller when to call `poll(now:)` again. Receipts echo the attempt they answer, so every
/// RTT sample is unambiguous (Karn's problem does not arise).
public struct ReliableSender: Sendable {
    public let policy: RetransmitPolicy
    public internal(set) var estimator: RTTEstimator
    /// Retransmissions sent (transmissions after the first of each message).
    public internal(set) var retransmits = 0
    /// Retransmissions made needless by an earlier transmission's receipt.
    public internal(set) var spuriousRetransmits = 0
    /// Retransmissions triggered by fast retransmit (included in `retransmits`).
    public internal(set) var fastRetransmits = 0
    /// While suspended (no path to the receiver), nothing is sent and nothing times out.
    public internal(set) var isSuspended = false

    /// This sender's stream id, carried in every message so receivers can keep its order.
    public let stream: UInt64
    /// Set when the sender transmits on other senders' behalf (the relay delivering an
    /// offline inbox): messages keep the id, stream, seq and floor they were stored with, so
    /// the receiver orders and dedupes them as if their original sender had retransmitted.
    /// A message submitted with floor 0 gets, at every transmission, the lowest seq of its
    /// (stream, receiver) still pending in this sender.
    public let keepsSenderSequence: Bool
    /// Datagrams sent beyond one per transmission (`RetransmitPolicy.retransmissionCopies`).
    public internal(set) var extraCopiesSent = 0
    /// Messages stored for an offline receiver whose seq is not resolved yet (`handleStored`).
    var storedUnresolved: [UInt64: SIMPMessage] = [:]
    /// Stored messages that their receiver receipted (see `storedMessageReceipted`), the
    /// latest 4096.
    var deliveredAfterStoring: Set<UInt64> = []
    var deliveredAfterStoringOrder: Deque<UInt64> = []
    var conversations: [String: Conversation] = [:]
    var pending: [UInt64: Pending] = [:]
    var sendOrder: Deque<UInt64> = []
    var waiting: Deque<SIMPMessage> = []
    /// Every message submitted and not yet settled (pending or waiting), with its submission time.
    var unsettled: [UInt64: NIODeadline] = [:]
    /// Submissions in order, for the give-up and delay deadlines (settled ones are dropped
    /// lazily from the front); the first `delaysNoticed` were already reported delayed or settled.
    var submissions: Deque<(id: UInt64, to: String, at: NIODeadline)> = []
    var delaysNoticed = 0
    /// The latest transmission that a receipt answered: the path worked then.
    var lastReceiptedSend: NIODeadline?
    /// Messages past their time limit that may still be answered: a transmission is out (they
    /// fail when its timer fires), or they were sent while the path still worked before a
    /// suspension (their receipt may have been lost with it; they fail when the retransmission
    /// after the next `resume` goes unanswered).
    var pastTimeLimit: Set<UInt64> = []
    /// When the last chance of a message past its time limit ends (see `poll`).
    var lastChanceEnds: [UInt64: NIODeadline] = [:]
    /// Pending messages the receiver's full log refused (INBOX_FULL), with the relay's text: sent
    /// again as usual, and if they fail at their time limit, reported with that refusal.
    var refusedAsFull: [UInt64: String] = [:]
    var timers = Heap<Timer>()
    var nextId: UInt64
    /// Paces transmissions under the relay's content rate limit (nil: unpaced).
    public internal(set) var pacer: SendPacer?
    /// Paces under `limit` from `now` on (`SendPacer.change`); nothing for an unpaced sender.
    public mutating func pace(under limit: RateLimit, now: NIODeadline) { pacer?.change(to: limit, now: now) }
    /// Retransmissions due but waiting for the pacer (sent before any new message), with their copies.
    var paced: Deque<(id: UInt64, copies: Int)> = []
    var pacedIds: Set<UInt64> = []

    /// - Parameter firstMessageId: the id of the first message; ids then increase by one.
    ///   Clients start from the wall clock in microseconds so a restarted client never reuses ids.
    ///   `pacing`: the rate to keep transmissions under (`SendPacer`); nil sends unpaced.
    ///   `estimator`: an earlier estimate of the same path to start from (nil: the policy's
    ///   initial RTO until the first sample).
    public init(
        firstMessageId: UInt64, policy: RetransmitPolicy = RetransmitPolicy(), keepsSenderSequence: Bool = false, pacing: RateLimit? = nil,
        estimator: RTTEstimator? = nil
    ) {
        self.keepsSenderSequence = keepsSenderSequence
        self.pacer = pacing.map(SendPacer.init)
        self.nextId = max(firstMessageId, 1)
        self.stream = max(firstMessageId, 1)
        self.policy = policy
        self.estimator = estimator ?? policy.makeEstimator()
    }

    /// Messages sent and not yet receipted or given up.
    public var inFlightCount: Int { pending.count }
    /// Messages held back by the id window.
    public var waitingCount: Int { waiting.count }
    /// When `poll(now:)` next has work, if ever: a retransmission (not while suspended), a
    /// message's give-up time or its delay notice.
    public var nextDeadline: NIODeadline? {
        let expiry = submissions.first.map { $0.at + policy.giveUpAfter }
        let notice = delaysNoticed < submissions.count ? submissions[delaysNoticed].at + policy.delayNoticeAfter : nil
        let pace = isSuspended || (paced.isEmpty && !waitingFitsWindow) ? nil : pacer?.nextTokenAt
        return [isSuspended ? nil : timers.min?.deadline, expiry, notice, pace].compactMap { $0 }.min()
    }

    /// Whether the first waiting message is within the id window (only the pacer holds it back).
    private var waitingFitsWindow: Bool {
        guard let next = waiting.first else { return false }
        guard let oldest = sendOrder.first(where: { pending[$0] != nil }) else { return true }
        return next.messageId < oldest || next.messageId - oldest < policy.maxIdSpan
    }
    /// Whether `messageId` is still being retransmitted.
    public func isPending(_ messageId: UInt64) -> Bool { pending[messageId] != nil }

    /// Accepts a content message; assigns its id (when 0) and its place in the conversation
    /// with `toUser`, and sends it now if the window allows.
    public mutating func submit(_ message: SIMPMessage, now: NIODeadline) -> (messageId: UInt64, output: SenderOutput) {
        var message = message
        if message.messageId == 0 {
            message.messageId = nextId
            nextId += 1
        }
        if !keepsSenderSequence {
            message.stream = stream
            var conversation = conversations[message.toUser] ?? Conversation()
            message.seq = conversation.nextSeq
            conversation.nextSeq += 1
            conversation.unresolved.append(message.seq)
            conversations[message.toUser] = conversation
        }
        waiting.append(message)
        unsettled[message.messageId] = now
        submissions.append((message.messageId, message.toUser, now))
        var output = SenderOutput()
        releaseWaiting(now: now, into: &output)
        return (message.messageId, output)
    }

    /// Uses up a message id without sending anything, for a message refused before it was
    /// submitted (ids must increase, not be contiguous).
    public mutating func skipMessageId() -> UInt64 {
        defer { nextId += 1 }
        return nextId
    }

    /// Stops sending and timing out (the control channel is down): new messages wait.
    public mutating func suspend() {
        isSuspended = true
    }

    /// Sends every unreceipted message again and then the waiting ones (after a reconnect).
    public mutating func resume(now: NIODeadline) -> SenderOutput {
        guard isSuspended else { return SenderOutput() }
        isSuspended = false
        var output = retransmitAll(now: now)
        releaseWaiting(now: now, into: &output)
        return output
    }

    /// Gives up what passed `giveUpAfter` (also while suspended), reports what passed
    /// `delayNoticeAfter`, and retransmits what timed out.
    public mutating func poll(now: NIODeadline) -> SenderOutput {
        var output = SenderOutput()
        expire(now: now, into: &output)
        noticeDelays(now: now, into: &output)
        guard !isSuspended else { return output }
        while let timer = timers.min, timer.deadline <= now {
            timers.removeMin()
            guard let entry = pending[timer.messageId], entry.attempts == timer.attempt, entry.timerDeadline == timer.deadline else { continue }
            let copies = entry.isHeld ? 1 : policy.retransmissionCopies
            if pastTimeLimit.contains(timer.messageId) {
                // A last chance of `maximumRTO` from its first timer past the limit, retransmitted
                // as usual: a resend can be lost too, and a path just back from an outage is
                // slower than the RTO learnt before it.
                let lastChance = lastChanceEnds[timer.messageId, default: now + policy.maximumRTO]
                if now < lastChance, policy.mayRetransmit(after: entry.attempts) {
                    lastChanceEnds[timer.messageId] = lastChance
                    retransmitPaced(timer.messageId, copies: copies, now: now, into: &output)
                    continue
                }
                pending[timer.messageId] = nil
                let failure = timeLimitFailure(timer.messageId, attempts: entry.attempts)
                settle(entry.message, now: now)
                output.events.append(.failed(messageId: timer.messageId, to: entry.message.toUser, failure))
            } else if !policy.mayRetransmit(after: entry.attempts) {
                pending[timer.messageId] = nil
                settle(entry.message, now: now)
                output.events.append(
                    .failed(
                        messageId: timer.messageId, to: entry.message.toUser, .timedOut(attempts: entry.attempts)))
            } else {
                retransmitPaced(timer.messageId, copies: copies, now: now, into: &output)
            }
        }
        releaseWaiting(now: now, into: &output)
        return output
    }

    /// Sends every unreceipted message again now (after a reconnect), counting it as an attempt.
    public mutating func retransmitAll(now: NIODeadline) -> SenderOutput {
        var output = SenderOutput()
        for id in sendOrder where pending[id] != nil { // one copy each: the link may be fine again
            retransmitPaced(id, copies: 1, now: now, into: &output)
        }
        return output
    }
}
