/// A residue class of session ids: those whose low 32 bits are ≡ `index` modulo `count`.
///
/// Relays that share one UDP port (`simp-server --threads N`, docs/OPERATIONS.md) each hand out
/// the ids of their own class, and the kernel steers every datagram to the socket of the relay
/// that holds its session by reading the id from the sealed header (docs/PROTOCOL.md §5.1: bytes
/// 5 ..< 9 of the datagram are the id's low 32 bits, big-endian). Only the low 32 bits count
/// because classic BPF loads 32-bit words.
public struct SessionIdClass: Sendable, Equatable {
    /// This relay's class, `0 ..< count`.
    public let index: UInt32
    /// How many relays share the port (1: every id is in the class).
    public let count: UInt32

    public init(index: UInt32, count: UInt32) {
        precondition(count >= 1 && index < count, "session id class \(index) of \(count)")
        self.index = index
        self.count = count
    }

    /// Whether `id` belongs to the class.
    public func contains(_ id: UInt64) -> Bool {
        UInt32(truncatingIfNeeded: id) % count == index
    }

    /// The member of the class nearest below `id` in its low 32 bits (`id` itself when
    /// `count` is 1): keeps the other 32 + log2(count) bits as random as `id` was.
    public func member(near id: UInt64) -> UInt64 {
        let low = UInt32(truncatingIfNeeded: id)
        let remainder = low % count
        let adjusted = remainder >= index ? low - (remainder - index) : low &- remainder &- (count - index)
        let candidate = (id & ~0xFFFF_FFFF) | UInt64(adjusted)
        return contains(candidate) ? candidate : (id & ~0xFFFF_FFFF) | UInt64(index)
    }
}
