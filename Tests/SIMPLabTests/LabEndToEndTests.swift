import SIMPLab
import XCTest

/// The lab's clients run the end-to-end layer (docs/E2E.md): each publishes its key bundle
/// through the relay (simulated or real), every message is sealed for its receiver's devices
/// before it is sent, and receivers decrypt what they are handed. The report counts deliveries
/// that travelled unencrypted and messages a device could not decrypt; both are bars.
final class LabEndToEndTests: XCTestCase {
    /// A lossy suite scenario, `messages` long at 10 ms apart.
    private func lossy(_ name: String = "loss-10", messages: Int = 100) throws -> Scenario {
        var scenario = try Suite.scenario(name)
        scenario.workload.messages = messages
        scenario.workload.intervalMs = 10
        return scenario
    }

    private func assertSealedEndToEnd(_ report: ScenarioReport, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(report.delivered, report.sent, file: file, line: line)
        XCTAssertGreaterThan(report.retransmits, 0, "the link lost datagrams", file: file, line: line)
        XCTAssertEqual(report.unencrypted, 0, "every delivered message travelled sealed end to end", file: file, line: line)
        XCTAssertEqual(report.decryptionFailures, 0, file: file, line: line)
        let bars = Set(report.bars.map(\.name))
        XCTAssertTrue(bars.isSuperset(of: ["unencrypted", "decryption_failures"]), "\(bars)", file: file, line: line)
        XCTAssertTrue(report.passed, "failed bars: \(report.failedBars)", file: file, line: line)
    }

    func testSimulatedClientsSealEveryMessageEndToEnd() throws {
        assertSealedEndToEnd(Simulation.run(try lossy()))
    }

    func testADeviceThatComesBackDecryptsWhatWaitedForIt() throws {
        let report = Simulation.run(try Suite.scenario("device-offline-back"))
        XCTAssertEqual(report.unencrypted, 0)
        XCTAssertEqual(report.decryptionFailures, 0)
        XCTAssertTrue(report.passed, "failed bars: \(report.failedBars)")
    }

    /// The simulated clients' end-to-end randomness (keys, ratchet keys) comes from the seed, as
    /// the links' does: a seed replays with the same keys, another seed makes other keys.
    func testTheSameSeedSealsTheSameBytes() throws {
        let scenario = try lossy(messages: 60)
        let first = Simulation.execute(scenario, seed: 7)
        let second = Simulation.execute(scenario, seed: 7)
        XCTAssertEqual(first.report, second.report)
        XCTAssertEqual(first.messages, second.messages)
        let digest = try XCTUnwrap(first.endToEndDigest)
        XCTAssertEqual(digest, second.endToEndDigest, "the same identity and prekeys")
        XCTAssertNotEqual(digest, Simulation.execute(scenario, seed: 8).endToEndDigest, "another seed, other keys")
    }

    /// A few seeds of the suite's harder scenarios, shortened, with end to end on: nothing
    /// failed, duplicated, out of order, unencrypted or undecryptable (`simp-lab replay --all
    /// --seeds 1-200` is the full sweep, docs/SCENARIOS.md).
    func testSeedsOfTheSuiteLoseNothingEndToEnd() throws {
        for name in ["fault-storm", "loss-30", "device-offline-back", "relay-restart", "udp-blocked-midway"] {
            var scenario = try Suite.scenario(name)
            scenario.workload.messages = min(scenario.workload.messages, 150)
            for seed: UInt64 in 1...3 {
                let report = Simulation.run(scenario, seed: seed)
                let what = "\(name) seed \(seed)"
                XCTAssertEqual(report.sent, scenario.totalMessages, what)
                XCTAssertEqual(report.delivered, report.sent, what)
                XCTAssertEqual(report.failed, 0, what)
                XCTAssertEqual(report.unresolved, 0, what)
                XCTAssertEqual(report.duplicates, 0, what)
                XCTAssertEqual(report.outOfOrder, 0, what)
                XCTAssertEqual(report.unencrypted, 0, what)
                XCTAssertEqual(report.decryptionFailures, 0, what)
            }
        }
    }

    func testRealClientsSealEveryMessageEndToEnd() async throws {
        assertSealedEndToEnd(try await RealRun.run(try lossy(messages: 50)))
    }
}
