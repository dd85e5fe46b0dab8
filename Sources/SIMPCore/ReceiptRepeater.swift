import NIOCore

/// Repeats, in a receipt's datagram copy, the ids of the previous copy to the same sender when
/// that went at most `window` ago (docs/PROTOCOL.md §6.1, "The datagram copy"). A batch's frame
/// and copy leave together, so a burst of loss that drops the copy tends to drop the frame's
/// segment too, and the frame then waits for TCP's retransmission; the next copy, a batch delay
/// later, usually gets through and settles the lost batch's messages as well (QUIC repeats
/// acknowledged ranges in later ACK frames for the same reason). A repeated id is one more
/// duplicate receipt, which senders ignore; only a copy's own ids are remembered, so an id is
/// repeated once.
public struct ReceiptRepeater: Sendable {
    /// How long after a copy its ids are still repeated.
    public static let defaultWindow: TimeAmount = .milliseconds(100)

    /// Zero: copies carry their own ids only.
    public let window: TimeAmount
    /// The latest copy's own ids per sender, and when it went.
    private var latest: [String: (ids: [UInt64], sentAt: NIODeadline)] = [:]

    public init(window: TimeAmount = ReceiptRepeater.defaultWindow) {
        self.window = window
    }

    /// The datagram copy of `receipt` sent at `now`: with the ids of the previous copy to the
    /// same sender added to `receiptIds` if that copy is recent and the merged batch still
    /// goes as a datagram of `maxDatagramSize` (`ClientSession.hasDatagramCopy`). Remembers
    /// `receipt`'s own ids.
    public mutating func datagramCopy(of receipt: SIMPMessage, now: NIODeadline, maxDatagramSize: Int) -> SIMPMessage {
        guard window > .zero, ReceiptBatcher.canCover(receipt) else { return receipt }
        let own = [receipt.messageId] + receipt.receiptIds
        let previous = latest.updateValue((own, now), forKey: receipt.toUser)
        if latest.count > 64 { latest = latest.filter { now - $0.value.sentAt <= window } }
        guard let previous, now - previous.sentAt <= window else { return receipt }
        var copy = receipt
        copy.receiptIds = Array(Set(receipt.receiptIds).union(previous.ids).subtracting([receipt.messageId])).sorted()
        guard copy.receiptIds.count <= SIMPMessage.maxReceiptIds,
            ClientSession.hasDatagramCopy(copy, maxDatagramSize: maxDatagramSize)
        else { return receipt }
        return copy
    }
}
