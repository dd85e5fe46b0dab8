import SIMPLab
import XCTest

/// The lab's generator is SIMPCore's `SplitMix64`: the same seed gives the same links, faults
/// and figures as before the two were one type.
final class SeededRandomTests: XCTestCase {
    func testASeedDrawsSplitMix64sSequence() {
        var random = SeededRandom(seed: 0)
        XCTAssertEqual([random.next(), random.next(), random.next()],
                       [0xE220_A839_7B1D_CDAF, 0x6E78_9E6A_A1B9_65F4, 0x06C4_5D18_8009_454F])
    }

    func testAStreamStartsFromTheMixedSeed() {
        // Computed with the generator as it was before it used SIMPCore's SplitMix64.
        var random = SeededRandom(seed: 7, stream: 3)
        XCTAssertEqual([random.next(), random.next(), random.next()],
                       [0xFB30_B34B_49FF_75FE, 0xE9A5_0B61_368F_349B, 0x643B_0AEA_190D_719F])
    }
}
