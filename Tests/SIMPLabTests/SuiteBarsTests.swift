import Foundation
import SIMPLab
import XCTest

/// Replays every scenario of `scenarios/` in sim mode over several seeds and asserts its bars
/// (every message delivered or reported failed, no duplicates, no reordering, no failure when
/// the link recovers within 30 s, per-device bars, and each scenario's own limits); bars failed
/// by the bugs in `KnownBugs` are reported there.
final class SuiteBarsTests: XCTestCase {
    static let seeds: [UInt64] = [1, 2, 3]

    func testEveryScenarioMeetsItsBarsInSimulation() throws {
        for entry in try ScenarioSuite(directory: Suite.directory).entries {
            for seed in Self.seeds {
                let report = Simulation.run(entry.scenario, seed: seed)
                XCTAssertGreaterThan(report.sent, 0)
                KnownBugs.assertBars(report) // every bar, except those of bugs named there
            }
        }
    }

    /// KCP's test link over ten seeds: KCP's fast mode reports avg 138 / max 392 ms there.
    func testKCPLinkFigures() throws {
        let kcp = try Suite.scenario("kcp-link")
        for seed in UInt64(1)...10 {
            let report = Simulation.run(kcp, seed: seed)
            XCTAssertEqual(report.sent, 1000)
            XCTAssertEqual(report.delivered, 1000)
            let latency = try XCTUnwrap(report.latency)
            XCTAssertLessThanOrEqual(latency.mean, 130, "seed \(seed)")
            XCTAssertLessThanOrEqual(latency.max, 392, "seed \(seed)")
            XCTAssertLessThanOrEqual(report.datagramsPerMessage, 1.2, "seed \(seed)")
        }
    }

    func testCleanLinkHasAlmostNoSpuriousRetransmits() throws {
        let clean = try Suite.scenario("clean")
        for seed in Self.seeds {
            XCTAssertLessThanOrEqual(Simulation.run(clean, seed: seed).spuriousRetransmitPercent, 1)
        }
    }
}
