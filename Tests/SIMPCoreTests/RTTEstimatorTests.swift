import NIOCore
import SIMPCore
import XCTest

final class RTTEstimatorTests: XCTestCase {
    private func expectedRTO(_ e: RTTEstimator) -> TimeAmount {
        let raw = e.smoothedRTT! + max(e.granularity, .nanoseconds(4 * e.rttVariance.nanoseconds))
        return min(max(raw, e.minimumRTO), e.maximumRTO)
    }

    func testInitialRTOBeforeSamples() {
        let estimator = RTTEstimator(initialRTO: .seconds(1))
        XCTAssertNil(estimator.smoothedRTT)
        XCTAssertEqual(estimator.sampleCount, 0)
        XCTAssertEqual(estimator.rto, .seconds(1))
        XCTAssertEqual(RTTEstimator(initialRTO: .seconds(30)).rto, .seconds(10))
        XCTAssertEqual(RTTEstimator(initialRTO: .milliseconds(10)).rto, .milliseconds(200))
    }

    func testFirstSampleSetsSRTTAndHalfVariance() {
        var estimator = RTTEstimator()
        estimator.addSample(.milliseconds(300))
        XCTAssertEqual(estimator.smoothedRTT, .milliseconds(300))
        XCTAssertEqual(estimator.rttVariance, .milliseconds(150))
        XCTAssertEqual(estimator.rto, .milliseconds(900))
        XCTAssertEqual(estimator.sampleCount, 1)
    }

    func testSecondSampleUsesRFC6298Gains() {
        var estimator = RTTEstimator()
        estimator.addSample(.milliseconds(300))
        estimator.addSample(.milliseconds(100))
        // RTTVAR from the old SRTT: (3·150 + |300 − 100|) / 4; SRTT = (7·300 + 100) / 8.
        XCTAssertEqual(estimator.rttVariance, .microseconds(162_500))
        XCTAssertEqual(estimator.smoothedRTT, .milliseconds(275))
        XCTAssertEqual(estimator.rto, .milliseconds(925))
    }

    func testSteadyRTTConverges() {
        var estimator = RTTEstimator()
        var unclamped = RTTEstimator(minimumRTO: .milliseconds(1))
        for _ in 0..<50 {
            estimator.addSample(.milliseconds(50))
            unclamped.addSample(.milliseconds(50))
        }
        XCTAssertEqual(Double(estimator.smoothedRTT!.nanoseconds), 50e6, accuracy: 1e3)
        XCTAssertEqual(estimator.rto, expectedRTO(estimator))
        XCTAssertEqual(estimator.rto, .milliseconds(200)) // the minimum wins
        XCTAssertEqual(unclamped.rto, expectedRTO(unclamped))
        XCTAssertGreaterThan(unclamped.rto, .milliseconds(50))
        XCTAssertLessThan(unclamped.rto, .milliseconds(52))
    }

    func testRTOIsClampedToMinimumAndMaximum() {
        var fast = RTTEstimator()
        fast.addSample(.milliseconds(1))
        XCTAssertEqual(fast.rto, .milliseconds(200))
        var slow = RTTEstimator()
        slow.addSample(.seconds(20))
        XCTAssertEqual(slow.rto, .seconds(10))
    }

    func testTimeoutDoublesPerAttemptUpToMaximum() {
        let estimator = RTTEstimator(initialRTO: .seconds(1))
        XCTAssertEqual(
            (1...6).map { estimator.timeout(forAttempt: $0) },
            [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(10), .seconds(10)])
        XCTAssertEqual(estimator.timeout(forAttempt: 0), .seconds(1))
        XCTAssertEqual(estimator.timeout(forAttempt: 3, backoff: 1.5), .milliseconds(2250))
        XCTAssertEqual(estimator.timeout(forAttempt: 5000), .seconds(10))
    }
}
