import DequeModule
import HeapModule
import NIOCore

/// What the receiver and the relay answer about messages in flight: receipts (single, batch,
/// HELD), STORED, refusals, INBOX_FULL and RATE_LIMITED, and the fast retransmissions that
/// receipts for later messages trigger.
extension ReliableSender {
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
}
