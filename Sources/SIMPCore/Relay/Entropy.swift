/// Where the relay's randomness comes from: the system's generator in production, a seeded
/// one in tests and in the simulator, so a run can be replayed exactly.
///
/// The seeded form (SplitMix64) is not cryptographically strong; it is for tests only.
public struct Entropy: Sendable {
    private enum Source: Sendable {
        case system
        case seeded(SplitMix64)
    }

    private var source: Source

    /// The operating system's cryptographically secure generator.
    public static var system: Entropy { Entropy(source: .system) }

    /// A deterministic generator for tests and simulations.
    public static func seeded(_ seed: UInt64) -> Entropy { Entropy(source: .seeded(SplitMix64(seed: seed))) }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        switch source {
        case .system:
            var generator = SystemRandomNumberGenerator()
            return generator.next()
        case .seeded(var generator):
            let bits = generator.next()
            source = .seeded(generator)
            return bits
        }
    }

    /// `count` random bytes.
    public mutating func bytes(_ count: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count + 8)
        while bytes.count < count {
            withUnsafeBytes(of: next()) { bytes.append(contentsOf: $0) }
        }
        return Array(bytes.prefix(count))
    }
}
