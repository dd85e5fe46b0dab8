import NIOCore
import XCTest

@testable import SIMPRelay

/// Which read bursts the forwarding-latency histogram observes.
final class LatencySamplingTests: XCTestCase {
    func testObservesOneBurstPerIntervalAndEveryBurstBelowThatRate() {
        var sampling = LatencySampling(interval: .milliseconds(1))
        let t0 = NIODeadline.uptimeNanoseconds(5_000_000_000)
        func observed(_ offsets: [Int64]) -> [Bool] { offsets.map { sampling.observes(burstAt: t0 + .microseconds($0)) } }
        XCTAssertEqual(observed([0, 100, 999]), [true, false, false], "the first burst, then none within the millisecond")
        XCTAssertEqual(observed([1_000, 1_100]), [true, false], "a millisecond after the last observed start")
        XCTAssertEqual(observed([1_900, 2_000, 2_050]), [false, true, false], "counted from the observed burst, not the skipped ones")
        XCTAssertEqual(observed([5_000, 7_000, 9_500]), [true, true, true], "slower than one a millisecond: every burst")
    }

    func testTenThousandBurstsASecondGiveAboutOneThousandObservations() {
        var sampling = LatencySampling()
        let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
        let observed = (0..<10_000).filter { sampling.observes(burstAt: t0 + .microseconds(Int64($0) * 100)) }.count
        XCTAssertEqual(observed, 1_000)
    }
}
