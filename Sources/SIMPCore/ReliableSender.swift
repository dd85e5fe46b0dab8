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
    public private(set) var estimator: RTTEstimator
    /// Retransmissions sent (transmissions after the first of each message).
    public private(set) var retransmits = 0
    /// Retransmissions made needless by an earlier transmission's receipt.
    public private(set) var spuriousRetransmits = 0
    /// Retransmissions triggered by fast retransmit (included in `retransmits`).
    public private(set) var fastRetransmits = 0
    /// While suspended (no path to the receiver), nothing is sent and nothing times out.
    public private(set) var isSuspended = false

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
    /// Stored messages that their receiver receipted (see `storedMessageReceipted`), the
    /// latest 4096.
    private var deliveredAfterStoring: Set<UInt64> = []
    private var deliveredAfterStoringOrder: Deque<UInt64> = []
    private var conversations: [String: Conversation] = [:]
    private var pending: [UInt64: Pending] = [:]
    private var sendOrder: Deque<UInt64> = []
    private var waiting: Deque<SIMPMessage> = []
    /// Every message submitted and not yet settled (pending or waiting), with its submission time.
    private var unsettled: [UInt64: NIODeadline] = [:]
    /// Submissions in order, for the give-up and delay deadlines (settled ones are dropped
    /// lazily from the front); the first `delaysNoticed` were already reported delayed or settled.
    private var submissions: Deque<(id: UInt64, to: String, at: NIODeadline)> = []
    private var delaysNoticed = 0
    /// The latest transmission that a receipt answered: the path worked then.
    private var lastReceiptedSend: NIODeadline?
    /// Messages past their time limit that may still be answered: a transmission is out (they
    /// fail when its timer fires), or they were sent while the path still worked before a
    /// suspension (their receipt may have been lost with it; they fail when the retransmission
    /// after the next `resume` goes unanswered).
    private var pastTimeLimit: Set<UInt64> = []
    /// When the last chance of a message past its time limit ends (see `poll`).
    private var lastChanceEnds: [UInt64: NIODeadline] = [:]
    /// Pending messages the receiver's full log refused (INBOX_FULL), with the relay's text: sent
    /// again as usual, and if they fail at their time limit, reported with that refusal.
    private var refusedAsFull: [UInt64: String] = [:]
    private var timers = Heap<Timer>()
    private var nextId: UInt64
    /// Paces transmissions under the relay's content rate limit (nil: unpaced).
    public private(set) var pacer: SendPacer?
    /// Paces under `limit` from `now` on (`SendPacer.change`); nothing for an unpaced sender.
    public mutating func pace(under limit: RateLimit, now: NIODeadline) { pacer?.change(to: limit, now: now) }
    /// Retransmissions due but waiting for the pacer (sent before any new message), with their copies.
    private var paced: Deque<(id: UInt64, copies: Int)> = []
    private var pacedIds: Set<UInt64> = []

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

    /// Handles a RECEIPT from the receiver, single or batch (docs/PROTOCOL.md §6.1): its
    /// `messageId` gives the RTT sample (through `attempt` and `holdMicros`); every id in
    /// `receiptIds` of a message to the receipt's `fromUser` is delivered too. Ids not in
    /// flight, repeated, or beyond `SIMPMessage.maxReceiptIds` are ignored. A HELD receipt
    /// (`held`) says the same messages arrived but wait behind a gap: RTT sample and fast
    /// retransmit as for a receipt, but they stay unsettled, sent again only every
    /// `maximumRTO`, until their final receipt.
    public mutating func handleReceipt(_ receipt: SIMPMessage, now: NIODeadline) -> SenderOutput {
        var output = SenderOutput()
        /// When the transmissions this receipt proves arrived were sent, and to whom.
        var arrivedSends: [NIODeadline] = []
        var receiver: String?
        if let entry = pending[receipt.messageId] {
            receiver = entry.message.toUser
            let attempt = Int(receipt.attempt)
            if sampleRTT(entry, answeredBy: receipt, now: now) {
                lastReceiptedSend = max(lastReceiptedSend ?? entry.sentAt[attempt - 1], entry.sentAt[attempt - 1])
                if entry.answered == 0 { spuriousRetransmits += entry.attempts - attempt }
                pending[receipt.messageId]!.answered = attempt
                arrivedSends.append(entry.sentAt[attempt - 1])
            }
            arrived(receipt.messageId, held: receipt.held, now: now, into: &output)
        }
        for id in receipt.receiptIds.prefix(SIMPMessage.maxReceiptIds) {
            // A batch speaks only for its receiver's messages, whichever transmission arrived:
            // the first is the one known to have been sent before the others.
            guard let entry = pending[id], entry.message.toUser == receipt.fromUser else { continue }
            receiver = entry.message.toUser
            if entry.answered == 0 {
                pending[id]!.answered = 1
                arrivedSends.append(entry.sentAt[0])
            }
            arrived(id, held: receipt.held, now: now, into: &output)
        }
        if let receiver, !arrivedSends.isEmpty {
            fastRetransmit(overtakenBy: arrivedSends, to: receiver, now: now, into: &output)
        }
        releaseWaiting(now: now, into: &output)
        return output
    }

    /// Pending message `id` arrived: settled and reported delivered, or, `held` behind a gap at
    /// the receiver, kept and from now on sent again only every `maximumRTO`.
    private mutating func arrived(_ id: UInt64, held: Bool, now: NIODeadline, into output: inout SenderOutput) {
        guard held else {
            let entry = pending.removeValue(forKey: id)!
            settle(entry.message, now: now)
            return output.events.append(
                .delivered(
                    messageId: id, to: entry.message.toUser, latency: now - entry.sentAt[0], attempts: entry.attempts))
        }
        guard !pending[id]!.isHeld else { return }
        pending[id]!.isHeld = true
        if !keepsSenderSequence { conversations[pending[id]!.message.toUser]?.held[pending[id]!.message.seq] = id }
        let deadline = pending[id]!.sentAt.last! + policy.maximumRTO
        pending[id]!.timerDeadline = deadline
        timers.insert(Timer(deadline: deadline, messageId: id, attempt: pending[id]!.attempts))
    }

    /// Takes the RTT sample `receipt` gives for `entry` (docs/PROTOCOL.md §6.3): its `attempt`
    /// names a transmission not answered before; the receiver's or relay's hold time is taken
    /// off. Returns whether it gave one.
    @discardableResult
    private mutating func sampleRTT(_ entry: Pending, answeredBy receipt: SIMPMessage, now: NIODeadline) -> Bool {
        let attempt = Int(receipt.attempt)
        guard (1...entry.attempts).contains(attempt), attempt > entry.answered else { return false }
        estimator.addSample(now - entry.sentAt[attempt - 1] - .microseconds(Int64(receipt.holdMicros)))
        return true
    }

    /// Handles a STORED receipt (the receiver is offline; the relay keeps the message in its
    /// inbox): the message is settled (no more retransmissions, reported like a receipt) but
    /// its seq stays unresolved, so later messages keep the receiver waiting for it and it is
    /// still delivered in order when the relay hands over the inbox.
    /// Its `attempt` gives an RTT sample as a receipt's does: once the relay takes custody, the
    /// round trip to its STORED is what the sender waits for (a user with several devices gets
    /// every message through the relay's inbox, so it has no other samples).
    public mutating func handleStored(_ receipt: SIMPMessage, now: NIODeadline) -> SenderOutput {
        var output = SenderOutput()
        guard let entry = pending.removeValue(forKey: receipt.messageId) else { return output }
        sampleRTT(entry, answeredBy: receipt, now: now)
        unsettled[receipt.messageId] = nil
        pastTimeLimit.remove(receipt.messageId)
        lastChanceEnds[receipt.messageId] = nil
        refusedAsFull[receipt.messageId] = nil
        storedUnresolved[receipt.messageId] = entry.message
        if !keepsSenderSequence { conversations[entry.message.toUser]?.stored.insert(entry.message.seq) }
        output.events.append(
            .delivered(
                messageId: receipt.messageId, to: entry.message.toUser,
                latency: now - entry.sentAt[0], attempts: entry.attempts))
        releaseWaiting(now: now, into: &output)
        return output
    }

    /// A stored message reached its receiver or was discarded: its seq no longer holds later
    /// messages back. Returns whether it was stored and unsettled here.
    @discardableResult
    public mutating func storedMessageSettled(_ messageId: UInt64, now: NIODeadline) -> Bool {
        guard let message = storedUnresolved.removeValue(forKey: messageId) else { return false }
        resolve(message, now: now)
        return true
    }

    /// The receiver itself receipted a message the relay had stored (a retransmission raced
    /// the receipt of an earlier copy): the receiver has it. Settles it and remembers it, so a
    /// later discard of the stored copy (`deliveredAfterStoring`) is not taken for a failure.
    /// Returns whether it was stored and unsettled here.
    public mutating func storedMessageReceipted(_ messageId: UInt64, now: NIODeadline) -> Bool {
        guard storedMessageSettled(messageId, now: now) else { return false }
        deliveredAfterStoring.insert(messageId)
        deliveredAfterStoringOrder.append(messageId)
        if deliveredAfterStoringOrder.count > 4096 { deliveredAfterStoring.remove(deliveredAfterStoringOrder.removeFirst()) }
        return true
    }

    /// Whether `messageId` was stored and then receipted by its receiver (recently).
    public func wasDeliveredAfterStoring(_ messageId: UInt64) -> Bool { deliveredAfterStoring.contains(messageId) }

    /// Handles the relay's refusal of `messageId`: the message fails without further retries.
    public mutating func handleRejection(
        messageId: UInt64, code: SIMPMessage.ErrorCode, reason: String, now: NIODeadline
    ) -> SenderOutput {
        var output = SenderOutput()
        guard let entry = pending.removeValue(forKey: messageId) else { return output }
        settle(entry.message, now: now)
        output.events.append(.failed(messageId: messageId, to: entry.message.toUser, .rejected(code, reason)))
        releaseWaiting(now: now, into: &output)
        return output
    }

    /// The receiver is offline and its log is full (ERROR INBOX_FULL for a message still pending,
    /// docs/PROTOCOL.md §6.6): not a failure. The message stays pending and is sent again when its
    /// timer says (backing off as usual) until stored or receipted; it fails only at its time
    /// limit, reported as refused with `reason`. Returns false if `messageId` is not pending.
    @discardableResult
    public mutating func refusedAsFull(messageId: UInt64, reason: String) -> Bool {
        guard pending[messageId] != nil else { return false }
        refusedAsFull[messageId] = reason
        return true
    }

    /// The relay refused `messageId` for the sender's content rate (RATE_LIMITED) and admits the
    /// next message `retryAfter` from `now`: the pacer slows down, and the message, still
    /// pending, is sent again when the pacer allows. Never a failure.
    public mutating func rateLimited(messageId: UInt64, retryAfter: TimeAmount, now: NIODeadline) {
        guard pacer != nil else { return } // unpaced: its retransmission timer resends it
        pacer!.refused(retryAfter: retryAfter, now: now)
        if pending[messageId] != nil, pacedIds.insert(messageId).inserted { paced.append((messageId, 1)) }
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

    /// Receipts arrived for transmissions made at `sentAt` to `receiver`: every message to the
    /// same receiver last transmitted before some of them was overtaken once per such
    /// transmission, and those overtaken `fastRetransmitThreshold` times are sent again now
    /// (their datagram was most likely lost). One walk per receipt, single or batch.
    private mutating func fastRetransmit(
        overtakenBy sentAt: [NIODeadline], to receiver: String, now: NIODeadline, into output: inout SenderOutput
    ) {
        guard policy.fastRetransmitThreshold > 0, !isSuspended, let latest = sentAt.max() else { return }
        let sorted = sentAt.sorted()
        for id in sendOrder {
            guard let entry = pending[id], entry.message.toUser == receiver, !entry.isHeld, entry.sentAt.last! < latest else { continue }
            let overtakers = sorted.countOfElements(after: entry.sentAt.last!)
            pending[id]!.overtaken += overtakers
            guard entry.overtaken + overtakers >= policy.fastRetransmitThreshold,
                policy.mayRetransmit(after: entry.attempts)
            else { continue }
            fastRetransmits += 1
            retransmitPaced(id, copies: policy.retransmissionCopies, now: now, into: &output)
        }
    }

    /// Sends pending message `id` again in `copies` copies, now if the pacer allows, else once
    /// it does (after the retransmissions already waiting for it).
    private mutating func retransmitPaced(_ id: UInt64, copies: Int, now: NIODeadline, into output: inout SenderOutput) {
        guard pacer != nil else { return retransmit(id, copies: copies, now: now, into: &output) }
        guard !pacedIds.contains(id) else { return }
        if paced.isEmpty, pacer!.take(now: now) { return retransmit(id, copies: copies, now: now, into: &output) }
        paced.append((id, copies))
        pacedIds.insert(id)
    }

    /// Sends the retransmissions waiting for the pacer while it allows (dropping settled ones).
    private mutating func sendPaced(now: NIODeadline, into output: inout SenderOutput) {
        while let next = paced.first {
            if pending[next.id] != nil {
                guard pacer?.take(now: now) ?? true else { return }
                retransmit(next.id, copies: next.copies, now: now, into: &output)
            }
            paced.removeFirst()
            pacedIds.remove(next.id)
        }
    }

    /// Sends pending message `id` again, in `copies` copies.
    private mutating func retransmit(_ id: UInt64, copies: Int, now: NIODeadline, into output: inout SenderOutput) {
        retransmits += 1
        let message = transmit(id, now: now)
        let copies = max(1, copies)
        output.transmit.append(contentsOf: repeatElement(message, count: copies))
        extraCopiesSent += copies - 1
    }

    /// A pending or waiting message has its outcome: its deadlines end, its seq is resolved.
    private mutating func settle(_ message: SIMPMessage, now: NIODeadline) {
        unsettled[message.messageId] = nil
        pastTimeLimit.remove(message.messageId)
        lastChanceEnds[message.messageId] = nil
        refusedAsFull[message.messageId] = nil
        resolve(message, now: now)
        while let first = submissions.first, unsettled[first.id] == nil {
            submissions.removeFirst()
            delaysNoticed = max(0, delaysNoticed - 1)
        }
    }

    /// Gives up every message submitted `giveUpAfter` or longer ago (they are the oldest, at the
    /// front of `submissions`): a waiting one fails now; one in flight when its transmission's
    /// timer fires unanswered. While suspended, a message first sent when the path still worked
    /// (its receipt may have been lost with the path) is resent after the reconnect and fails
    /// only if that goes unanswered too; the others fail now.
    private mutating func expire(now: NIODeadline, into output: inout SenderOutput) {
        while let first = submissions.first, unsettled[first.id] == nil || first.at + policy.giveUpAfter <= now {
            submissions.removeFirst()
            delaysNoticed = max(0, delaysNoticed - 1)
            guard unsettled[first.id] != nil else { continue }
            if let entry = pending[first.id], !isSuspended || lastReceiptedSend.map({ entry.sentAt[0] <= $0 + estimator.rto }) == true {
                pastTimeLimit.insert(first.id) // it may still be answered: fails at its next timer
                continue
            }
            unsettled[first.id] = nil
            var attempts = 0
            if let entry = pending.removeValue(forKey: first.id) {
                attempts = entry.attempts
                resolve(entry.message, now: now)
            } else if let index = waiting.firstIndex(where: { $0.messageId == first.id }) {
                resolve(waiting.remove(at: index), now: now)
            }
            let failure = timeLimitFailure(first.id, attempts: attempts)
            output.events.append(.failed(messageId: first.id, to: first.to, failure))
        }
    }

    /// Why message `id` fails at its time limit: the full inbox that refused it, or no receipt.
    private mutating func timeLimitFailure(_ id: UInt64, attempts: Int) -> DeliveryFailure {
        guard let reason = refusedAsFull.removeValue(forKey: id) else { return .expired(after: policy.giveUpAfter, attempts: attempts) }
        return .rejected(.inboxFull, reason)
    }

    /// Reports, once each, the messages that passed `delayNoticeAfter` without an outcome.
    private mutating func noticeDelays(now: NIODeadline, into output: inout SenderOutput) {
        while delaysNoticed < submissions.count {
            let next = submissions[delaysNoticed]
            guard next.at + policy.delayNoticeAfter <= now else { return }
            delaysNoticed += 1
            if unsettled[next.id] != nil { output.delayed.append(DelayedMessage(messageId: next.id, to: next.to, waited: now - next.at)) }
        }
    }

    /// Marks a message's seq as no longer awaited, so later messages carry a higher floor. When
    /// the floor reaches held messages, the receiver has nothing left to wait for below them:
    /// their final receipts are due within a round trip, so they are sent again one RTO from now
    /// unless those come (a receiver that restarted lost them; the maximum RTO is long to wait).
    private mutating func resolve(_ message: SIMPMessage, now: NIODeadline) {
        guard var conversation = conversations[message.toUser] else { return }
        conversation.held[message.seq] = nil
        conversation.stored.remove(message.seq)
        conversation.resolved.insert(message.seq)
        var seq = conversation.floor()
        conversations[message.toUser] = conversation
        while let id = conversation.held[seq], let entry = pending[id] {
            let deadline = now + estimator.rto
            if let timer = entry.timerDeadline, timer > deadline {
                pending[id]!.timerDeadline = deadline
                timers.insert(Timer(deadline: deadline, messageId: id, attempt: entry.attempts))
            }
            seq += 1
        }
    }

    /// Records a transmission of pending message `id` (stamped with the conversation's current
    /// floor and custody floor) and arms its timer.
    private mutating func transmit(_ id: UInt64, now: NIODeadline) -> SIMPMessage {
        let index = pending.index(forKey: id)!
        let floor = floorForTransmission(at: index)
        // The relay delivering stored messages passes on the custody floor they were stored with.
        let custodyFloor = keepsSenderSequence ? nil : conversations[pending.values[index].message.toUser]?.custodyFloor()
        let attempts = pending.values[index].attempts + 1
        let timeout = pending.values[index].isHeld ? policy.maximumRTO : estimator.timeout(forAttempt: attempts, backoff: policy.backoff)
        timers.insert(Timer(deadline: now + timeout, messageId: id, attempt: attempts))
        return pending.values[index].recordTransmission(at: now, floor: floor, custodyFloor: custodyFloor, timerDeadline: now + timeout)
    }

    /// The floor the next transmission of the pending message at `index` carries; nil: the
    /// one it has (see `Pending.computesFloor`).
    private mutating func floorForTransmission(at index: Dictionary<UInt64, Pending>.Index) -> UInt64? {
        let peer = pending.values[index].message.toUser
        guard keepsSenderSequence else { return conversations[peer]?.floor() ?? 0 }
        guard pending.values[index].computesFloor else { return nil }
        let stream = pending.values[index].message.stream
        var lowestPending = pending.values[index].message.seq
        for other in pending.values where other.message.toUser == peer && other.message.stream == stream {
            lowestPending = min(lowestPending, other.message.seq)
        }
        return min(pending.values[index].originalFloor ?? lowestPending, lowestPending)
    }

    /// Sends the retransmissions waiting for the pacer, then moves waiting messages into flight
    /// while they fit in the id window and the pacer allows.
    private mutating func releaseWaiting(now: NIODeadline, into output: inout SenderOutput) {
        guard !isSuspended else { return }
        sendPaced(now: now, into: &output)
        guard paced.isEmpty else { return }
        while let front = sendOrder.first, pending[front] == nil { sendOrder.removeFirst() }
        while let nextId = waiting.first?.messageId {
            if let oldest = sendOrder.first, nextId >= oldest, nextId - oldest >= policy.maxIdSpan {
                break
            }
            guard pacer?.take(now: now) ?? true else { break }
            let next = waiting.removeFirst()
            let originalFloor = next.floor == 0 ? nil : next.floor
            pending[nextId] = Pending(message: next, computesFloor: keepsSenderSequence, originalFloor: originalFloor)
            sendOrder.append(nextId)
            output.transmit.append(transmit(nextId, now: now))
        }
    }
}
