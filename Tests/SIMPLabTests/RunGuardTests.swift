import NIOCore
import XCTest

@testable import SIMPLab

/// The simulator's watch from outside virtual time: bound on wall time, stall detection and
/// progress pacing, driven with chosen clock readings.
final class RunGuardTests: XCTestCase {
    private let start = ContinuousClock.now

    private func watch(wallLimit: TimeAmount = .seconds(120)) -> RunGuard {
        RunGuard(
            start: start, wallLimit: wallLimit, progressInterval: .milliseconds(250), stallTime: .seconds(10),
            stallEvents: 10_000, eventsPerCheck: 256)
    }

    private func wall(_ seconds: Double) -> ContinuousClock.Instant { start + .milliseconds(Int64(seconds * 1000)) }

    func testVirtualTimeStuckAtOneInstantIsAStall() {
        var guardian = watch()
        var decisions: [RunGuard.Decision] = []
        // Virtual time moves for a while, then sticks at 54.85 s while wall time runs on.
        for step in 0..<50 { decisions.append(guardian.check(virtual: .milliseconds(Int64(step)), wall: wall(Double(step) / 100))) }
        XCTAssertFalse(decisions.contains(.stop(.stalled)))
        let stuck = TimeAmount.milliseconds(54_850)
        for step in 0..<200 {
            let decision = guardian.check(virtual: stuck, wall: wall(1 + Double(step) * 0.1))
            if step < 100 { XCTAssertNotEqual(decision, .stop(.stalled), "only after 10 s at one instant") }
            if decision == .stop(.stalled) {
                XCTAssertGreaterThanOrEqual(step, 100)
                return
            }
        }
        XCTFail("never called stalled")
    }

    func testFewEventsAtOneInstantAreNoStallHoweverLong() {
        var guardian = watch()
        // Each check stands for 256 events: 30 checks are 7,680 events, under the 10,000 needed.
        for step in 0..<30 {
            XCTAssertNotEqual(guardian.check(virtual: .seconds(3), wall: wall(Double(step))), .stop(.stalled))
        }
    }

    func testWallLimitStopsTheRun() {
        var guardian = watch(wallLimit: .seconds(2))
        XCTAssertNotEqual(guardian.check(virtual: .seconds(1), wall: wall(1.9)), .stop(.wallTimeLimit))
        XCTAssertEqual(guardian.check(virtual: .seconds(2), wall: wall(2)), .stop(.wallTimeLimit))
    }

    func testProgressIsDueEveryInterval() {
        var guardian = watch()
        let reports = stride(from: 0.0, to: 2.0, by: 0.05).map { time in
            guardian.check(virtual: .milliseconds(Int64(time * 1000)), wall: wall(time))
        }.filter { $0 == .report }.count
        XCTAssertEqual(reports, 7, "at 0.25, 0.5, … 1.75 s")
    }
}
