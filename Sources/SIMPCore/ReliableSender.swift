import DequeModule
import HeapModule
import NIOCore

/// How persistently a `ReliableSender` retransmits.
public struct RetransmitPolicy: Sendable, Equatable {
    /// RTO before any RTT sample (RFC 6298 recommends 1 s).
    public var initialRTO: TimeAmount = .seconds(1)
    /// Floor of the RTO. 150 ms rather than RFC 6298's 1 s: receipts carry the attempt they
    /// answer, so samples are unambiguous, and fast retransmit handles most losses anyway.
    public var minimumRTO: TimeAmount = .milliseconds(150)
    public var maximumRTO: TimeAmount = .seconds(10)
    /// Each retransmission multiplies the message's timeout by this factor.
    public var backoff: Double = 2
    /// Transmissions (first send included) before the sender gives up. With the defaults the
    /// timeouts add up to more than 30 s even from the RTO floor (39 s), so an outage shorter
    /// than that never fails a message.
    public var maxAttempts: Int = 9
    /// A message is sent only while its id is within this many ids of the oldest unreceipted
    /// one; later messages wait. Keeps every in-flight id inside the receiver's dedupe window.
    public var maxIdSpan: UInt64 = 1024
    /// Fast retransmit: a message is sent again at once, without waiting for its timer, when
    /// this many messages to the same receiver, sent after its latest transmission, have been
    /// receipted first. 0 turns fast retransmit off.
    public var fastRetransmitThreshold: Int = 2
    /// Copies sent of each retransmission (not of first transmissions or of the resend after
    /// a reconnect): a message that was lost once is sent twice, so losing it again takes two
    /// losses. On KCP's test link this keeps the worst send → receipt time under 392 ms in 30
    /// of 30 seeds (1 copy: 23 of 30) for ~0.06 more datagrams per message (docs/SCENARIOS.md).
    public var retransmissionCopies: Int = 2

    public init() {}
}

/// Why a message was given up.
public enum DeliveryFailure: Error, Equatable, Sendable {
    /// No receipt after `attempts` transmissions.
    case timedOut(attempts: Int)
    /// The relay refused the message.
    case rejected(SIMPMessage.ErrorCode, String)
    /// Refused before sending: sealed, it would take `size` bytes, over the relay's `limit`.
    case tooLarge(size: Int, limit: Int)
}

extension DeliveryFailure: CustomStringConvertible {
    public var description: String {
        switch self {
        case .timedOut(let attempts): return "no receipt after \(attempts) transmissions"
        case .rejected(_, let reason): return reason
        case .tooLarge(let size, let limit):
            return "message too large: it would be a \(size)-byte datagram and the relay accepts at most \(limit) bytes "
                + "(shorten it by \(size - limit) bytes or more)"
        }
    }
}

/// What became of one message.
public enum SenderEvent: Equatable, Sendable {
    /// The receipt came back `latency` after the first transmission, which took `attempts` sends.
    case delivered(messageId: UInt64, to: String, latency: TimeAmount, attempts: Int)
    case failed(messageId: UInt64, to: String, DeliveryFailure)
}

/// Work produced by the sender: datagrams to transmit now, and outcomes to report.
public struct SenderOutput: Equatable, Sendable {
    public var transmit: [SIMPMessage] = []
    public var events: [SenderEvent] = []
    public init() {}
}

/// The sending half of SIMP's reliability: retransmits each content message until its receipt
/// arrives or `RetransmitPolicy.maxAttempts` is reached, and says which happened.
///
/// Sans-I/O: every call takes the current time, returns what to send, and `nextDeadline` tells
/// the caller when to call `poll(now:)` again. Receipts echo the attempt they answer, so every
/// RTT sample is unambiguous (Karn's problem does not arise).
public struct ReliableSender: Sendable {
    private struct Pending: Sendable {
        var message: SIMPMessage
        var sentAt: [NIODeadline] = []
        /// Receipts for later-sent messages to the same receiver since the latest transmission.
        var overtaken = 0
        /// `keepsSenderSequence` (the relay delivering stored messages): the floor is the lowest
        /// seq of the same (stream, receiver) still pending here, or the floor the message was
        /// stored with if that is lower (its original sender may still be sending an earlier
        /// message directly).
        var computesFloor = false
        /// The floor the message came with (nil: none, as for room copies).
        var originalFloor: UInt64?
        var attempts: Int { sentAt.count }
    }

    private struct Timer: Comparable, Sendable {
        let deadline: NIODeadline
        let messageId: UInt64
        let attempt: Int
        static func < (a: Timer, b: Timer) -> Bool { a.deadline < b.deadline }
    }

    public let policy: RetransmitPolicy
    public private(set) var estimator: RTTEstimator
    /// Retransmissions sent (transmissions after the first of each message).
    public private(set) var retransmits = 0
    /// Retransmissions made needless by an earlier transmission's receipt.
    public private(set) var spuriousRetransmits = 0
    /// Retransmissions triggered by fast retransmit (included in `retransmits`).
    public private(set) var fastRetransmits = 0
    /// While suspended (no path to the receiver), nothing is sent and nothing times out.
    public private(set) var isSuspended = false

    /// Sequence state of one (stream, receiver) conversation.
    private struct Conversation: Sendable {
        var nextSeq: UInt64 = 1
        /// Unresolved seqs in send order; resolved ones are dropped lazily from the front.
        var unresolved: Deque<UInt64> = []
        var resolved: Set<UInt64> = []

        /// The lowest seq not yet receipted or given up (or the next seq when none is open).
        mutating func floor() -> UInt64 {
            while let first = unresolved.first, resolved.remove(first) != nil { unresolved.removeFirst() }
            return unresolved.first ?? nextSeq
        }
    }

    /// This sender's stream id, carried in every message so receivers can keep its order.
    public let stream: UInt64
    /// Set when the sender transmits on other senders' behalf (the relay delivering an
    /// offline inbox): messages keep the id, stream, seq and floor they were stored with, so
    /// the receiver orders and dedupes them as if their original sender had retransmitted.
    /// A message submitted with floor 0 gets, at every transmission, the lowest seq of its
    /// (stream, receiver) still pending in this sender.
    public let keepsSenderSequence: Bool
    /// Datagrams sent beyond one per transmission (`RetransmitPolicy.retransmissionCopies`).
    public private(set) var extraCopiesSent = 0
    /// Messages stored for an offline receiver whose seq is not resolved yet (`handleStored`).
    private var storedUnresolved: [UInt64: SIMPMessage] = [:]
    private var conversations: [String: Conversation] = [:]
    private var pending: [UInt64: Pending] = [:]
    private var sendOrder: Deque<UInt64> = []
    private var waiting: Deque<SIMPMessage> = []
    private var timers = Heap<Timer>()
    private var nextId: UInt64

    /// - Parameter firstMessageId: the id of the first message; ids then increase by one.
    ///   Clients start from the wall clock in microseconds so a restarted client never reuses ids.
    public init(firstMessageId: UInt64, policy: RetransmitPolicy = RetransmitPolicy(), keepsSenderSequence: Bool = false) {
        self.keepsSenderSequence = keepsSenderSequence
        self.nextId = max(firstMessageId, 1)
        self.stream = max(firstMessageId, 1)
        self.policy = policy
        self.estimator = RTTEstimator(
            initialRTO: policy.initialRTO, minimumRTO: policy.minimumRTO, maximumRTO: policy.maximumRTO)
    }

    /// Messages sent and not yet receipted or given up.
    public var inFlightCount: Int { pending.count }
    /// Messages held back by the id window.
    public var waitingCount: Int { waiting.count }
    /// When `poll(now:)` next has work, if ever.
    public var nextDeadline: NIODeadline? { isSuspended ? nil : timers.min?.deadline }
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

    /// Handles a RECEIPT from the receiver.
    public mutating func handleReceipt(_ receipt: SIMPMessage, now: NIODeadline) -> SenderOutput {
        var output = SenderOutput()
        guard let entry = pending.removeValue(forKey: receipt.messageId) else { return output }
        resolve(entry.message)
        let attempt = Int(receipt.attempt)
        if (1...entry.attempts).contains(attempt) {
            let held = TimeAmount.microseconds(Int64(receipt.holdMicros))
            estimator.addSample(now - entry.sentAt[attempt - 1] - held)
            spuriousRetransmits += entry.attempts - attempt
        }
        output.events.append(.delivered(
            messageId: receipt.messageId, to: entry.message.toUser,
            latency: now - entry.sentAt[0], attempts: entry.attempts))
        if (1...entry.attempts).contains(attempt) {
            fastRetransmit(overtakenBy: entry.sentAt[attempt - 1], to: entry.message.toUser, now: now, into: &output)
        }
        releaseWaiting(now: now, into: &output)
        return output
    }

    /// Handles a STORED receipt (the receiver is offline; the relay keeps the message in its
    /// inbox): the message is settled (no more retransmissions, reported like a receipt) but
    /// its seq stays unresolved, so later messages keep the receiver waiting for it and it is
    /// still delivered in order when the relay hands over the inbox.
    public mutating func handleStored(_ receipt: SIMPMessage, now: NIODeadline) -> SenderOutput {
        var output = SenderOutput()
        guard let entry = pending.removeValue(forKey: receipt.messageId) else { return output }
        storedUnresolved[receipt.messageId] = entry.message
        output.events.append(.delivered(
            messageId: receipt.messageId, to: entry.message.toUser,
            latency: now - entry.sentAt[0], attempts: entry.attempts))
        releaseWaiting(now: now, into: &output)
        return output
    }

    /// A stored message reached its receiver or was discarded: its seq no longer holds later
    /// messages back.
    public mutating func storedMessageSettled(_ messageId: UInt64) {
        guard let message = storedUnresolved.removeValue(forKey: messageId) else { return }
        resolve(message)
    }

    /// Handles the relay's refusal of `messageId`: the message fails without further retries.
    public mutating func handleRejection(
        messageId: UInt64, code: SIMPMessage.ErrorCode, reason: String, now: NIODeadline
    ) -> SenderOutput {
        var output = SenderOutput()
        guard let entry = pending.removeValue(forKey: messageId) else { return output }
        resolve(entry.message)
        output.events.append(.failed(messageId: messageId, to: entry.message.toUser, .rejected(code, reason)))
        releaseWaiting(now: now, into: &output)
        return output
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

    /// Retransmits what timed out and gives up what ran out of attempts.
    public mutating func poll(now: NIODeadline) -> SenderOutput {
        var output = SenderOutput()
        guard !isSuspended else { return output }
        while let timer = timers.min, timer.deadline <= now {
            timers.removeMin()
            guard let entry = pending[timer.messageId], entry.attempts == timer.attempt else { continue }
            if entry.attempts >= policy.maxAttempts {
                pending[timer.messageId] = nil
                resolve(entry.message)
                output.events.append(.failed(
                    messageId: timer.messageId, to: entry.message.toUser, .timedOut(attempts: entry.attempts)))
            } else {
                retransmit(timer.messageId, now: now, into: &output)
            }
        }
        releaseWaiting(now: now, into: &output)
        return output
    }

    /// Sends every unreceipted message again now (after a reconnect), counting it as an attempt.
    public mutating func retransmitAll(now: NIODeadline) -> SenderOutput {
        var output = SenderOutput()
        for id in sendOrder where pending[id] != nil { // one copy each: the link may be fine again
            retransmits += 1
            output.transmit.append(transmit(id, now: now))
        }
        return output
    }

    /// A receipt arrived for a transmission made at `sentAt` to `receiver`: every message to the
    /// same receiver last transmitted before it was overtaken once more, and those overtaken
    /// `fastRetransmitThreshold` times are sent again now (their datagram was most likely lost).
    private mutating func fastRetransmit(
        overtakenBy sentAt: NIODeadline, to receiver: String, now: NIODeadline, into output: inout SenderOutput
    ) {
        guard policy.fastRetransmitThreshold > 0, !isSuspended else { return }
        for id in sendOrder {
            guard let entry = pending[id], entry.message.toUser == receiver, entry.sentAt.last! < sentAt else { continue }
            pending[id]!.overtaken += 1
            guard entry.overtaken + 1 >= policy.fastRetransmitThreshold, entry.attempts < policy.maxAttempts else { continue }
            fastRetransmits += 1
            retransmit(id, now: now, into: &output)
        }
    }

    /// Sends pending message `id` again, in `policy.retransmissionCopies` copies.
    private mutating func retransmit(_ id: UInt64, now: NIODeadline, into output: inout SenderOutput) {
        retransmits += 1
        let message = transmit(id, now: now)
        let copies = max(1, policy.retransmissionCopies)
        output.transmit.append(contentsOf: repeatElement(message, count: copies))
        extraCopiesSent += copies - 1
    }

    /// Marks a message's seq as no longer awaited, so later messages carry a higher floor.
    private mutating func resolve(_ message: SIMPMessage) {
        conversations[message.toUser]?.resolved.insert(message.seq)
    }

    /// Records a transmission of pending message `id` (stamped with the conversation's current
    /// floor) and arms its timer.
    private mutating func transmit(_ id: UInt64, now: NIODeadline) -> SIMPMessage {
        pending[id]!.sentAt.append(now)
        pending[id]!.overtaken = 0
        let attempts = pending[id]!.attempts
        pending[id]!.message.attempt = UInt32(attempts)
        let peer = pending[id]!.message.toUser
        if !keepsSenderSequence {
            pending[id]!.message.floor = conversations[peer]?.floor() ?? 0
        } else if pending[id]!.computesFloor {
            let stream = pending[id]!.message.stream
            let lowestPending = pending.values
                .filter { $0.message.toUser == peer && $0.message.stream == stream }.map(\.message.seq).min() ?? 0
            pending[id]!.message.floor = min(pending[id]!.originalFloor ?? lowestPending, lowestPending)
        }
        let timeout = estimator.timeout(forAttempt: attempts, backoff: policy.backoff)
        timers.insert(Timer(deadline: now + timeout, messageId: id, attempt: attempts))
        return pending[id]!.message
    }

    /// Moves waiting messages into flight while they fit in the id window.
    private mutating func releaseWaiting(now: NIODeadline, into output: inout SenderOutput) {
        guard !isSuspended else { return }
        while let front = sendOrder.first, pending[front] == nil { sendOrder.removeFirst() }
        while let next = waiting.first {
            if let oldest = sendOrder.first, next.messageId >= oldest, next.messageId - oldest >= policy.maxIdSpan {
                break
            }
            waiting.removeFirst()
            pending[next.messageId] = Pending(
                message: next, computesFloor: keepsSenderSequence, originalFloor: next.floor == 0 ? nil : next.floor)
            sendOrder.append(next.messageId)
            output.transmit.append(transmit(next.messageId, now: now))
        }
    }
}
