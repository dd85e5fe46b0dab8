/// The message ids a bench receiver was handed, to catch one handed over twice.
///
/// A sender's ids increase by one from its first (`ReliableSender`), so they are kept as bits
/// in an array that starts at the lowest id seen, not in a hash set: one bit and no hashing per
/// message. An id more than `maximumSpan` away from that range is kept in a set instead.
struct DeliveredIds {
    /// The farthest an id may lie from the bits' range to be added to it (bits, 8 MiB).
    static let maximumSpan: UInt64 = 1 << 26

    /// The id of bit 0 of `words[0]` (a multiple of 64); nil until the first insert.
    private var base: UInt64?
    private var words: [UInt64] = []
    private var outliers: Set<UInt64> = []

    /// Records `id`; false if it was recorded before.
    mutating func insert(_ id: UInt64) -> Bool {
        let aligned = id & ~63
        let base = self.base ?? aligned
        if id < base {
            let missingWords = (base - aligned) / 64
            guard missingWords * 64 <= Self.maximumSpan else { return outliers.insert(id).inserted }
            words.insert(contentsOf: repeatElement(0, count: Int(missingWords)), at: 0)
            self.base = aligned
            return insert(id)
        }
        self.base = base
        let offset = id - base
        guard offset < UInt64(words.count) * 64 + Self.maximumSpan else { return outliers.insert(id).inserted }
        let word = Int(offset / 64), bit = UInt64(1) << (offset % 64)
        if word >= words.count { words.append(contentsOf: repeatElement(0, count: word - words.count + 1)) }
        guard words[word] & bit == 0 else { return false }
        words[word] |= bit
        return true
    }
}
