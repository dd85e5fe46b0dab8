import Foundation
import XCTest

@testable import SIMPLab

/// `simp-lab replay --all` prints a summary that fits a 100-column terminal, and a scenario name
/// that is neither a file nor in the suite is answered with the suite's names.
final class ReportTableTests: XCTestCase {
    /// A report with the widest figures the suite gives (four-digit counts, latencies over a
    /// second, a failed bar).
    func wideReport(_ name: String) -> ScenarioReport {
        var report = ScenarioReport(scenario: name, mode: .sim, seed: 123)
        report.sent = 4000
        report.delivered = 3999
        report.failed = 1
        report.duplicates = 12
        report.outOfOrder = 345
        report.deliveredAndFailed = 1
        report.decryptionFailures = 2
        report.latency = LatencySummary(p50: 1144.8, p95: 9999.9, p99: 12345.6, max: 65432.1, mean: 138.2)
        report.datagramsPerMessage = 12.345
        report.spuriousRetransmits = 1234
        report.pathSwitches = 12
        report.bars = [Bar(name: "p99_ms", limit: 1000, value: 12345.6, passed: false)]
        report.passed = false
        return report
    }

    func testTheSuiteSummaryFitsOneHundredColumns() throws {
        let names = try ScenarioSuite(directory: Suite.directory).entries.map(\.scenario.name)
        XCTAssertGreaterThan(names.count, 20)
        let summary = ReportTable.summary(names.map(wideReport))
        let table = summary.split(separator: "\n").prefix(names.count + 1)
        for line in table {
            XCTAssertLessThanOrEqual(line.count, 100, "\(line.count) columns: \(line)")
        }
        XCTAssertTrue(table[0].hasPrefix("scenario "), summary)
        // What the columns leave out of a failed run is said under the table.
        XCTAssertTrue(
            summary.contains("\(names[0]) (seed 123): bar p99_ms 12345.60 > 1000; 1 delivered and failed; 2 undecrypted"), summary)
    }

    func testAnUnknownScenarioNameListsTheSuite() throws {
        XCTAssertThrowsError(try ScenarioSuite.scenario(named: "nosuch", directory: Suite.directory)) { error in
            let text = "\(error)"
            XCTAssertTrue(text.hasPrefix("no scenario \"nosuch\": no such file, and none of that name in "), text)
            for name in ["blackout", "relay-restart", "tcp-close", "udp-blocked-midway"] {
                XCTAssertTrue(text.contains(name), "\(name) missing from: \(text)")
            }
        }
        let named = try ScenarioSuite.scenario(named: "tcp-close", directory: Suite.directory)
        XCTAssertEqual(named.name, "tcp-close")
        let missingDirectory = URL(fileURLWithPath: "/nonexistent-simp-scenarios")
        XCTAssertThrowsError(try ScenarioSuite.scenario(named: "x", directory: missingDirectory)) { error in
            XCTAssertEqual("\(error)", "no scenario \"x\": no such file, and no scenario directory /nonexistent-simp-scenarios (--dir)")
        }
    }
}
