import SIMPLab
import XCTest

/// The lab's generator draws from SIMPCore's `SplitMix64` (whose own sequence
/// `SplitMix64Tests` pins): the same seed and stream give the same links, faults and figures as
/// before the two were one type.
final class SeededRandomTests: XCTestCase {
    func testAStreamStartsFromTheMixedSeed() {
        // Computed with the generator as it was before it used SIMPCore's SplitMix64.
        var random = SeededRandom(seed: 7, stream: 3)
        XCTAssertEqual(
            [random.next(), random.next(), random.next()],
            [0xFB30_B34B_49FF_75FE, 0xE9A5_0B61_368F_349B, 0x643B_0AEA_190D_719F])
    }
}
