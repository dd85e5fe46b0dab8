import SIMPCore

/// A small, fast random generator whose sequence depends only on its seed (SIMPCore's
/// `SplitMix64`), so a scenario replays identically for the same seed on every machine.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var generator: SplitMix64

    /// A generator that starts from `seed`.
    public init(seed: UInt64) { generator = SplitMix64(seed: seed) }

    /// A generator for one part of a run (one link, one client), independent of the others.
    public init(seed: UInt64, stream: UInt64) {
        var mixer = SplitMix64(seed: seed ^ (stream &* 0x9E37_79B9_7F4A_7C15))
        generator = SplitMix64(seed: mixer.next())
    }

    /// The next 64 pseudo-random bits.
    public mutating func next() -> UInt64 { generator.next() }

    /// True with probability `percent` / 100.
    public mutating func chance(_ percent: Double) -> Bool {
        guard percent > 0 else { return false }
        return unit() * 100 < percent
    }

    /// A uniform value in [0, 1).
    public mutating func unit() -> Double {
        Double(next() >> 11) * (1.0 / 9_007_199_254_740_992.0)
    }
}
