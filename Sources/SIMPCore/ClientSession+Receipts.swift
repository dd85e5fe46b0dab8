import NIOCore

/// How a client's receipts leave: one per message, or in batches per sender (docs/PROTOCOL.md
/// §6.1), on the control channel with a datagram copy.
extension ClientSession {
    /// Receipts waiting in a batch go out now, whatever their age (the client is closing).
    public mutating func flushReceipts(now: NIODeadline) -> Output {
        var output = Output()
        flushReceipts(now: now, into: &output)
        return output
    }

    /// Whether receipts wait in a batch (`flushReceipts` has work).
    public var hasBatchedReceipts: Bool { !batcher.isEmpty }

    /// The user closes the client: it takes no more messages (what arrives from now on stays
    /// unreceipted, for the user's next session: a receipt written after the DISCONNECT would be
    /// lost, and the message delivered again to an application that had it), and the receipts
    /// still batched go out now, before the DISCONNECT (docs/PROTOCOL.md §4.5).
    public mutating func finishTakingMessages(now: NIODeadline) -> Output {
        stopTakingMessages()
        return flushReceipts(now: now)
    }

    /// The shell read a burst of datagrams. The receipts batched so far go out now, one frame
    /// per sender, when `receiptBatchDelay` is zero or an arrival of the burst suggested loss
    /// (`suggestsLoss`); otherwise they keep waiting for others to the same senders, and `poll`
    /// sends them once the oldest has waited `receiptBatchDelay` (docs/PROTOCOL.md §6.1).
    public mutating func datagramBurstEnded(now: NIODeadline) -> Output {
        guard configuration.receiptBatchDelay == .zero || receiptsAreUrgent else { return Output() }
        return flushReceipts(now: now)
    }

    mutating func flushReceipts(now: NIODeadline, into output: inout Output) {
        receiptsAreUrgent = false
        guard !batcher.isEmpty else { return }
        for batch in batcher.flush(now: now) { writeReceipt(batch, now: now, into: &output) }
    }

    /// A receipt is due: batched when the configuration says so and it is batchable, else
    /// written at once.
    mutating func sendReceipt(_ receipt: SIMPMessage, now: NIODeadline, into output: inout Output) {
        guard sendsBatches, isRegistered, ReceiptBatcher.isBatchable(receipt) else {
            return writeReceipt(receipt, now: now, into: &output)
        }
        if let full = batcher.add(receipt, now: now) { writeReceipt(full, now: now, into: &output) }
    }

    /// Whether this session's receipts go in batches: the configuration says so, no
    /// `deliveryLimit` applies, and the relay routes batches.
    var sendsBatches: Bool {
        configuration.batchesReceipts && configuration.deliveryLimit == nil && relayBatchesReceipts
    }

    /// Hands `output.delivered` to the application through `take`, which says whether it took
    /// a message as new (false: it had it already, before a restart). Once it has taken
    /// `Configuration.deliveryLimit` new messages the session takes no more
    /// (`stopTakingMessages`), and the receipts of the messages it did not hand over are
    /// withdrawn (`withdrawReceipts`).
    public mutating func handOver(_ output: inout Output, to take: (SIMPMessage) -> Bool) {
        handOver(&output) { message, _ in take(message) ? 1 : 0 }
    }

    /// `handOver` where `take` is also told how many more new messages the application may
    /// take (`allowance`, nil without a `deliveryLimit`), and says how many it took with each:
    /// 0, 1, or more when the message let the shell hand over others that waited for it (room
    /// posts waiting for the sender key it carries, docs/E2E.md §14.3), each counted once.
    public mutating func handOver(_ output: inout Output, to take: (_ message: SIMPMessage, _ allowance: Int?) -> Int) {
        var notTaken: [SIMPMessage] = []
        for message in output.delivered {
            guard takesMessages else {
                notTaken.append(message)
                continue
            }
            countTaken(take(message, configuration.deliveryLimit.map { $0 - messagesTaken }))
        }
        withdrawReceipts(of: notTaken, from: &output)
    }

    /// The application took `count` new messages outside `handOver` (room posts an earlier
    /// process held, handed over at start: docs/E2E.md §14.3): counted against the limit.
    public mutating func countTaken(_ count: Int) {
        messagesTaken += count
        if let limit = configuration.deliveryLimit, messagesTaken >= limit { stopTakingMessages() }
    }

    /// The application did not take `messages`, handed over in `output.delivered` after it
    /// stopped taking messages (`stopTakingMessages`): their receipts are taken back out of
    /// `output` (frames and datagram copies) and out of the receipts owed to the next
    /// connection, so the messages stay with their senders or the relay for another session.
    /// Receipts are sent singly when a `deliveryLimit` is set: a batch is not split.
    public mutating func withdrawReceipts(of messages: [SIMPMessage], from output: inout Output) {
        guard !messages.isEmpty else { return }
        let notTaken = Set(messages.map { ReceiptKey(sender: $0.fromUser, messageId: $0.messageId) })
        let isWithdrawn = { (frame: SIMPMessage) in
            frame.kind == .receipt && notTaken.contains(ReceiptKey(sender: frame.toUser, messageId: frame.messageId))
        }
        output.controlFrames.removeAll(where: isWithdrawn)
        output.datagrams.removeAll(where: isWithdrawn)
        receipts.withdraw(where: isWithdrawn)
    }

    /// A message's sender and id: what its receipt names as `toUser` and `messageId`.
    private struct ReceiptKey: Hashable {
        let sender: String
        let messageId: UInt64
    }

    /// Writes a receipt frame (single or batch) and its datagram copy (which repeats the
    /// previous copy's ids to the same sender when batches are on, `ReceiptRepeater`); without a control
    /// connection it is kept for the next one. A HELD receipt is not kept: it is only a hint
    /// (the sender's next retransmission gets another), and the final receipt follows.
    mutating func writeReceipt(_ receipt: SIMPMessage, now: NIODeadline, into output: inout Output) {
        guard isRegistered else {
            if !receipt.held { receipts.couldNotWrite(receipt) }
            return
        }
        output.controlFrames.append(receipt)
        receiptFramesSent += 1
        if !receipt.held {
            receipts.written(receipt, beforePing: nextPingId)
            let confirmAt = now + configuration.receiptConfirmDelay
            updateRegistration { $0.receiptConfirmPing = $0.receiptConfirmPing ?? confirmAt }
        }
        guard configuration.receiptDatagrams, Self.hasDatagramCopy(receipt, maxDatagramSize: maxDatagramSize) else { return }
        output.datagrams.append(sendsBatches ? repeater.datagramCopy(of: receipt, now: now, maxDatagramSize: maxDatagramSize) : receipt)
        receiptDatagramsSent += 1
    }

    /// Whether a receipt frame also goes as a datagram (docs/PROTOCOL.md §6.1): not for room
    /// copies ("#room" is no session the relay could forward it to), nor for a batch whose ids
    /// might not fit in a datagram of `maxDatagramSize` (10 bytes per id at most).
    public static func hasDatagramCopy(_ receipt: SIMPMessage, maxDatagramSize: Int) -> Bool {
        !receipt.toUser.hasPrefix("#") && 256 + 10 * receipt.receiptIds.count <= maxDatagramSize
    }
}
