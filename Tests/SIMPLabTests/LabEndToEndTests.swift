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

    func testRealClientsSealEveryMessageEndToEnd() async throws {
        assertSealedEndToEnd(try await RealRun.run(try lossy(messages: 50)))
    }
}
