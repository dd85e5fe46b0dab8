import Foundation
import SIMPLab
import XCTest

/// Each fault scenario does what its name says, and two different faults do not give the same
/// figures: a relay that restarts is down for a while (clients that reconnect meanwhile are
/// refused); cut control connections reconnect at once to a relay that never went away.
final class FaultScenarioTests: XCTestCase {
    func testARelayRestartIsDownLongerThanTheFirstReconnectAndDiffersFromCutConnections() throws {
        // The runs end 2 s after the fault (the suite's go on for 15 s more, to the same effect).
        var restart = try Suite.scenario("relay-restart")
        var close = try Suite.scenario("tcp-close")
        restart.workload.messages = 350
        close.workload.messages = 350
        let fault = try XCTUnwrap(restart.faults.first)
        XCTAssertEqual(fault.kind, .restartRelay)
        XCTAssertEqual(close.faults.first?.kind, .closeControl)
        let downtimeMs = try XCTUnwrap(fault.forMs)
        // The clients' first reconnect comes 1 s ± 20 % after the loss: a shorter downtime
        // would be over before anyone noticed, and the run would be tcp-close's.
        XCTAssertGreaterThan(downtimeMs, 1200 + restart.link.up.delayMs + restart.link.up.jitterMs)
        for seed: UInt64 in [2, 3] { // seeds on which a 1 s restart gave tcp-close's very figures
            let restarted = try XCTUnwrap(Simulation.run(restart, seed: seed).latency)
            let cut = try XCTUnwrap(Simulation.run(close, seed: seed).latency)
            XCTAssertNotEqual(restarted, cut, "seed \(seed)")
            // A message sent as the relay stops is receipted only once it is back.
            XCTAssertGreaterThanOrEqual(restarted.max, downtimeMs, "seed \(seed)")
            XCTAssertLessThan(cut.max, downtimeMs, "seed \(seed)")
        }
    }
}
