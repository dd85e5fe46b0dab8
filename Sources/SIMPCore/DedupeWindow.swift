/// Remembers which message ids from one sender were already delivered, over a sliding window
/// of the highest `size` ids (the anti-replay window of RFC 4303, §3.4.3).
///
/// Senders keep every in-flight id within `RetransmitPolicy.maxIdSpan` of their oldest
/// unreceipted one, so with `size` larger than that span a retransmission always falls inside.
public struct DedupeWindow: Sendable, Equatable {
    /// Verdict on one arriving id.
    public enum Verdict: Equatable, Sendable {
        /// First arrival: deliver to the application.
        case deliver
        /// Already delivered.
        case duplicate
        /// Older than the window: cannot be told apart from a duplicate, so not delivered.
        case tooOld
    }

    public let size: UInt64
    public private(set) var highest: UInt64 = 0
    /// One bit per slot; allocated at the first id (a window that never sees one, e.g. an idle
    /// session's replay window in the relay, costs no storage).
    private var bits: [UInt64] = []

    public init(size: UInt64 = 4096) {
        precondition(size > 0 && size % 64 == 0, "window size must be a positive multiple of 64")
        self.size = size
    }

    /// Records `id` and says whether it should be delivered.
    public mutating func accept(_ id: UInt64) -> Verdict {
        if highest == 0 || id > highest {
            advance(to: id)
            set(id)
            return .deliver
        }
        if highest - id >= size { return .tooOld }
        if isSet(id) { return .duplicate }
        set(id)
        return .deliver
    }

    /// Whether `id` was accepted before and is still inside the window (recording nothing).
    public func contains(_ id: UInt64) -> Bool {
        highest != 0 && id <= highest && highest - id < size && isSet(id)
    }

    /// Slides the window so `id` is its highest slot, clearing the slots that enter it.
    private mutating func advance(to id: UInt64) {
        if bits.isEmpty {
            bits = Array(repeating: 0, count: Int(size / 64))
        } else if highest == 0 || id - highest >= size {
            for i in bits.indices { bits[i] = 0 }
        } else {
            var slot = highest + 1
            while slot <= id { clear(slot); slot += 1 }
        }
        highest = id
    }

    private func position(_ id: UInt64) -> (word: Int, mask: UInt64) {
        let slot = id % size
        return (Int(slot / 64), 1 << (slot % 64))
    }
    private func isSet(_ id: UInt64) -> Bool { let p = position(id); return bits[p.word] & p.mask != 0 }
    private mutating func set(_ id: UInt64) { let p = position(id); bits[p.word] |= p.mask }
    private mutating func clear(_ id: UInt64) { let p = position(id); bits[p.word] &= ~p.mask }
}

/// Duplicate detection for every sender a receiver hears from: one `DedupeWindow` per sender
/// **stream**, because two processes of one user (two devices, or `simp send` beside
/// `simp chat`) number their messages independently, and one window per user would judge the
/// older process's ids too old and drop them. An id already accepted on another stream of the
/// same sender (a newer process resending from the outbox what an older one delivered) is a
/// duplicate too. At most `streamsPerSender` windows are kept per sender; the least recently
/// used is forgotten first.
public struct SenderDedupe: Sendable {
    private struct Windows: Sendable {
        var byStream: [UInt64: DedupeWindow] = [:]
        /// Streams, least recently used first.
        var recency: [UInt64] = []

        mutating func accept(_ id: UInt64, stream: UInt64, size: UInt64, limit: Int) -> DedupeWindow.Verdict {
            if byStream[stream] == nil {
                if recency.count >= limit { byStream[recency.removeFirst()] = nil }
                byStream[stream] = DedupeWindow(size: size)
            } else if recency.last != stream {
                recency.removeAll { $0 == stream }
            }
            if recency.last != stream { recency.append(stream) }
            for (other, window) in byStream where other != stream && window.contains(id) { return .duplicate }
            return byStream[stream]!.accept(id)
        }
    }

    public let windowSize: UInt64
    public let streamsPerSender: Int
    private var senders: [String: Windows] = [:]

    public init(windowSize: UInt64, streamsPerSender: Int) {
        self.windowSize = windowSize
        self.streamsPerSender = max(1, streamsPerSender)
    }

    /// Records message `id` of `sender`'s `stream` (0 for unordered messages) and says whether
    /// it should be delivered.
    public mutating func accept(_ id: UInt64, from sender: String, stream: UInt64) -> DedupeWindow.Verdict {
        senders[sender, default: Windows()].accept(id, stream: stream, size: windowSize, limit: streamsPerSender)
    }
}
