/// Where the relay's randomness comes from: the system's generator in production, a seeded
/// one in tests and in the simulator, so a run can be replayed exactly.
///
/// The seeded form (SplitMix64) is not cryptographically strong; it is for tests only.
public struct Entropy: Sendable {
    private enum Source: Sendable {
        case system
        case seeded(state: UInt64)
    }

    private var source: Source

    /// The operating system's cryptographically secure generator.
    public static var system: Entropy { Entropy(source: .system) }

    /// A deterministic generator for tests and simulations.
    public static func seeded(_ seed: UInt64) -> Entropy { Entropy(source: .seeded(state: seed)) }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        switch source {
        case .system:
            var generator = SystemRandomNumberGenerator()
            return generator.next()
        case .seeded(var state):
            state &+= 0x9E37_79B9_7F4A_7C15
            source = .seeded(state: state)
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
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
