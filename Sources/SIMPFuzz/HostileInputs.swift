/// Random and mutated datagrams and control-stream pieces, made from the seed corpus, for
/// tests that throw hostile traffic at a live relay. The same generator state gives the same
/// inputs.
public struct HostileInputs<Random: RandomNumberGenerator> {
    public var random: Random
    private let datagramSeeds: [[UInt8]]
    private let controlSeeds: [[UInt8]]

    public init(random: Random) {
        self.random = random
        datagramSeeds = SeedCorpus.datagrams.sorted { $0.key < $1.key }.map(\.value)
        // Control seeds without their first byte (which only tells the fuzz target how to cut).
        controlSeeds = SeedCorpus.controlStreams.sorted { $0.key < $1.key }.map { Array($0.value.dropFirst()) }
    }

    /// A datagram: random bytes (1 in 4), else a seed, mutated 2 times in 3.
    public mutating func datagram() -> [UInt8] {
        input(from: datagramSeeds)
    }

    /// Bytes for a control connection, in the same mix; after random or mutated bytes the
    /// stream is usually out of step, and the relay waits for a frame or closes.
    public mutating func controlBytes() -> [UInt8] {
        input(from: controlSeeds)
    }

    private mutating func input(from seeds: [[UInt8]]) -> [UInt8] {
        if Int.random(in: 0..<4, using: &random) == 0 { return randomBytes(maxCount: 300) }
        let seed = seeds.randomElement(using: &random)!
        guard Int.random(in: 0..<3, using: &random) > 0 else { return seed }
        return mutated(seed, others: seeds)
    }

    /// `bytes` with one to four random edits: bit flips, overwritten, inserted or removed
    /// bytes, truncation, or a splice with another seed.
    private mutating func mutated(_ bytes: [UInt8], others: [[UInt8]]) -> [UInt8] {
        var bytes = bytes
        for _ in 0..<Int.random(in: 1...4, using: &random) {
            let position = bytes.isEmpty ? 0 : Int.random(in: 0..<bytes.count, using: &random)
            switch Int.random(in: 0..<6, using: &random) {
            case 0 where !bytes.isEmpty: bytes[position] ^= 1 << UInt8.random(in: 0..<8, using: &random)
            case 1 where !bytes.isEmpty: bytes[position] = UInt8.random(in: .min ... .max, using: &random)
            case 2: bytes.insert(contentsOf: randomBytes(maxCount: 8), at: position)
            case 3 where !bytes.isEmpty: bytes.removeSubrange(position..<min(bytes.count, position + Int.random(in: 1...8, using: &random)))
            case 4: bytes.removeSubrange(position...)
            default:
                let other = others.randomElement(using: &random)!
                bytes = Array(bytes[..<position]) + other[Int.random(in: 0...other.count, using: &random)...]
            }
        }
        return bytes
    }

    private mutating func randomBytes(maxCount: Int) -> [UInt8] {
        (0..<Int.random(in: 0...maxCount, using: &random)).map { _ in UInt8.random(in: .min ... .max, using: &random) }
    }
}
