import NIOCore

/// Gathers a receiver's RECEIPTs per original sender and sends them as batch receipts
/// (docs/PROTOCOL.md §6.1): one frame covers every message of that sender receipted since the
/// last flush. Every waiting batch goes out when the oldest receipt in them has waited
/// `delay` (`nextDeadline`), or when the client closes; one that reaches `maxIds` goes at once.
///
/// The batch's own `messageId`, `attempt` and `holdMicros` are those of the receipt added last
/// (the newest arrival, so the sender's RTT sample is the freshest one); its `holdMicros` grows by
/// the time the batch waited. The other ids go in `receiptIds`, ascending and without duplicates.
/// Receipts that are not a receiver's plain DELIVERED receipt to a user (room copies, whose
/// `toUser` is `#room`, HELD receipts, and anything already carrying `receiptIds`) are not
/// batched. A HELD receipt goes out single at once: it is a hint sent only behind a gap (so
/// rare), its fast retransmit is what it is for, and a batch's ids all mean the same (§6.1).
public struct ReceiptBatcher: Sendable {
    private struct Batch: Sendable {
        var newest: SIMPMessage
        var newestAddedAt: NIODeadline
        var ids: [UInt64] = []
    }

    /// How long a receiver's receipt waits for others to the same sender by default
    /// (docs/PROTOCOL.md §6.1): long enough that a busy conversation's receipts share frames,
    /// far below any sender's minimum RTO (150 ms), and not a delay a person sees.
    public static let defaultDelay = TimeAmount.milliseconds(10)

    /// The longest a receipt waits for a flush.
    public let delay: TimeAmount
    /// Ids per batch (besides its `messageId`); a batch that reaches it is sent at once. 255
    /// keeps a batch's datagram copy within 3 KB even when the ids are far apart.
    public let maxIds: Int
    private var batches: [String: Batch] = [:]
    /// Senders in the order their batch was started.
    private var senders: [String] = []
    private var oldest: NIODeadline?

    public init(delay: TimeAmount = ReceiptBatcher.defaultDelay, maxIds: Int = 255) {
        self.delay = delay
        self.maxIds = max(1, min(maxIds, SIMPMessage.maxReceiptIds))
    }

    /// Whether `receipt` may travel in a batch.
    public static func isBatchable(_ receipt: SIMPMessage) -> Bool {
        canCover(receipt) && receipt.receiptIds.isEmpty
    }

    /// Whether `receipt` is of the kind a batch may be: a receiver's plain DELIVERED receipt to
    /// a user (a HELD batch would mark every id held; rooms and the relay's receipts stay single).
    public static func canCover(_ receipt: SIMPMessage) -> Bool {
        receipt.kind == .receipt && receipt.status == .delivered && !receipt.held
            && !receipt.toUser.isEmpty && !receipt.toUser.hasPrefix("#")
    }

    /// Receipts waiting for a flush.
    public var isEmpty: Bool { senders.isEmpty }
    /// When the oldest waiting receipt must go out.
    public var nextDeadline: NIODeadline? { oldest.map { $0 + delay } }

    /// Adds a batchable receipt made at `now`; returns a batch that is full and must go now.
    public mutating func add(_ receipt: SIMPMessage, now: NIODeadline) -> SIMPMessage? {
        precondition(Self.isBatchable(receipt), "only a receiver's DELIVERED receipts to a user are batched")
        if oldest == nil { oldest = now }
        guard var batch = batches[receipt.toUser] else {
            batches[receipt.toUser] = Batch(newest: receipt, newestAddedAt: now)
            senders.append(receipt.toUser)
            return nil
        }
        batch.ids.append(batch.newest.messageId)
        batch.newest = receipt
        batch.newestAddedAt = now
        guard batch.ids.count >= maxIds else {
            batches[receipt.toUser] = batch
            return nil
        }
        batches[receipt.toUser] = nil
        senders.removeAll { $0 == receipt.toUser }
        if senders.isEmpty { oldest = nil }
        return Self.frame(batch, now: now)
    }

    /// Every waiting batch, one receipt per sender, in the order they were started.
    public mutating func flush(now: NIODeadline) -> [SIMPMessage] {
        defer {
            batches.removeAll(keepingCapacity: true)
            senders.removeAll(keepingCapacity: true)
            oldest = nil
        }
        return senders.compactMap { batches[$0].map { Self.frame($0, now: now) } }
    }

    /// The receipt for `batch`: the newest receipt, its hold extended to `now`, and the other ids.
    private static func frame(_ batch: Batch, now: NIODeadline) -> SIMPMessage {
        var receipt = batch.newest
        let waited = max(0, (now - batch.newestAddedAt).nanoseconds / 1000)
        receipt.holdMicros = UInt32(clamping: Int64(receipt.holdMicros) + waited)
        var ids = batch.ids.sorted()
        var unique = 0
        for id in ids where id != 0 && id != receipt.messageId && (unique == 0 || ids[unique - 1] != id) {
            ids[unique] = id
            unique += 1
        }
        ids.removeLast(ids.count - unique)
        receipt.receiptIds = ids
        return receipt
    }
}

extension Array where Element: Comparable {
    /// How many elements of this ascending array are greater than `value` (binary search).
    func countOfElements(after value: Element) -> Int {
        var low = 0, high = count
        while low < high {
            let middle = (low + high) / 2
            if self[middle] > value { high = middle } else { low = middle + 1 }
        }
        return count - low
    }
}
