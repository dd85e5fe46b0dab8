/// Bounds on what a receiver keeps for messages that have not arrived yet (docs/E2E.md §5.3).
public struct E2ELimits: Sendable {
    /// Most message keys one header may make a receiver skip in one chain. Only the newest
    /// `maxSkippedKeys` of them are kept; the bound is on the work (one KDF step per key), and
    /// leaves room for the messages a sender gives up on during a long outage (a 75 s blackout
    /// at 50 messages a second fails about 2,500 of them, which the next message skips).
    public var maxSkipPerChain: UInt32 = 25_000
    /// Most skipped message keys a session (or a room sender key) keeps; the oldest go first.
    public var maxSkippedKeys = 2_000
    /// How long a skipped message key is kept, in milliseconds of the caller's clock.
    public var skippedKeyLifetimeMilliseconds: UInt64 = 7 * 24 * 3_600 * 1_000
    /// How many earlier receiving ratchet keys a session remembers to recognise duplicates.
    public var retiredRatchetKeys = 32

    public init() {}

    /// The limits SIMP uses.
    public static let standard = E2ELimits()
}

/// Message keys of messages not received yet, kept so that late (reordered) messages still
/// decrypt; bounded in number and age. Oldest first.
struct SkippedMessageKeys: Sendable, Equatable {
    struct Entry: Sendable, Equatable {
        /// The chain's ratchet public key (pairwise) or sender key id (rooms, 4 bytes).
        let chain: [UInt8]
        let number: UInt32
        let messageKey: SecretBytes
        /// The caller's clock, in milliseconds, when the key was skipped.
        let storedAt: UInt64
    }

    private(set) var entries: [Entry] = []

    init(entries: [Entry] = []) { self.entries = entries }

    var count: Int { entries.count }

    /// Removes and returns the key for `number` in `chain`, if kept.
    mutating func take(chain: [UInt8], number: UInt32) -> SecretBytes? {
        guard let index = entries.firstIndex(where: { $0.number == number && $0.chain == chain }) else { return nil }
        return entries.remove(at: index).messageKey
    }

    /// Keeps a key, dropping the oldest when over `limits.maxSkippedKeys`.
    mutating func insert(_ entry: Entry, limits: E2ELimits) {
        entries.append(entry)
        if entries.count > limits.maxSkippedKeys { entries.removeFirst(entries.count - limits.maxSkippedKeys) }
    }

    /// Forgets keys older than the lifetime.
    mutating func forgetExpired(now: UInt64, limits: E2ELimits) {
        entries.removeAll { now >= $0.storedAt && now - $0.storedAt > limits.skippedKeyLifetimeMilliseconds }
    }

    func write(to writer: inout ByteWriter) {
        writer.u32(UInt32(entries.count))
        for entry in entries {
            writer.lengthPrefixed(entry.chain)
            writer.u32(entry.number)
            writer.raw(entry.messageKey.bytes)
            writer.u64(entry.storedAt)
        }
    }

    init(reading reader: inout ByteReader) throws {
        let count = try reader.u32()
        guard Int(count) * 46 <= reader.remainingCount else { throw E2EError.malformed("skipped keys: count \(count)") }
        for _ in 0..<count {
            entries.append(
                Entry(
                    chain: try reader.lengthPrefixed(), number: try reader.u32(),
                    messageKey: SecretBytes(try reader.key()), storedAt: try reader.u64()))
        }
    }
}
