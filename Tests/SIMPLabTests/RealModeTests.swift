import NIOCore
import SIMPLab
import XCTest

/// A representative subset of the suite with real sockets: a relay, a private Redis and two
/// clients behind impairment proxies, shortened to keep CI quick. `simp-lab replay --all
/// --mode real` runs the full suite.
final class RealModeTests: XCTestCase {
    /// A suite scenario at 10 ms per message, `messages` long.
    private func shortened(_ name: String, messages: Int = 200) throws -> Scenario {
        var scenario = try Suite.scenario(name)
        scenario.workload.messages = messages
        scenario.workload.intervalMs = 10
        return scenario
    }

    private func assertBars(_ report: ScenarioReport, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(report.mode, .real, file: file, line: line)
        XCTAssertEqual(report.delivered, report.sent, file: file, line: line)
        XCTAssertEqual(report.receipted, report.sent, file: file, line: line)
        XCTAssertTrue(report.passed, "failed bars: \(report.failedBars)", file: file, line: line)
    }

    func testRandomLoss() async throws {
        let report = try await RealRun.run(try shortened("loss-10"))
        assertBars(report)
        XCTAssertGreaterThan(report.retransmits, 0, "the proxy dropped datagrams")
    }

    func testDuplicationAndReordering() async throws {
        var scenario = try shortened("duplication")
        scenario.link.up.reorder = .init(percent: 10, depth: 3)
        scenario.link.down.reorder = .init(percent: 10, depth: 3)
        let report = try await RealRun.run(scenario)
        assertBars(report)
        XCTAssertEqual(report.duplicates, 0)
        XCTAssertEqual(report.outOfOrder, 0)
    }

    func testBlackout() async throws {
        var scenario = try shortened("blackout")
        scenario.link.up.blackouts = [.init(atMs: 500, forMs: 1500)]
        scenario.link.down.blackouts = scenario.link.up.blackouts
        let report = try await RealRun.run(scenario)
        assertBars(report)
        XCTAssertGreaterThan(try XCTUnwrap(report.latency).max, 1000, "messages waited out the blackout")
    }

    func testRelayRestart() async throws {
        var scenario = try shortened("relay-restart")
        scenario.faults = [Fault(atMs: 500, kind: .restartRelay, forMs: 500)]
        let report = try await RealRun.run(scenario)
        assertBars(report)
        XCTAssertGreaterThan(try XCTUnwrap(report.latency).max, 500, "messages waited for the relay")
    }

    // MARK: Devices (the suite's scenarios as they are: each a few seconds)

    /// A device scenario as it is; the wait for deliveries a device never gets is cut short.
    private func runDevices(_ name: String) async throws -> LabRun {
        var options = LabOptions()
        options.maxWallTime = .seconds(10)
        let run = try await RealRun.execute(try Suite.scenario(name), options: options)
        XCTAssertEqual(run.report.mode, .real)
        XCTAssertEqual(run.report.receipted, run.report.sent)
        KnownBugs.assertBars(run.report) // every bar, except those of bugs named there
        return run
    }

    func testTwoDevicesOnline() async throws {
        let report = try await runDevices("two-devices").report
        XCTAssertEqual(report.devices?.map(\.expected), [400, 400])
        XCTAssertEqual(report.devices?.map(\.delivered), [400, 400])
    }

    func testDeviceOfflineAndBack() async throws {
        let run = try await runDevices("device-offline-back")
        XCTAssertEqual(run.report.devices?.first?.delivered, 400, "the phone got everything")
        let offline = try XCTUnwrap(try Suite.scenario("device-offline-back").devices[1].offline.first)
        let laptop = run.messages.compactMap { message in message.devices?["laptop"].map { (message.sentMs, $0) } }
        let backlog = laptop.filter { $0.0 >= offline.atMs + 100 && $0.0 < offline.atMs + offline.forMs - 100 }
        XCTAssertGreaterThan(backlog.count, 100, "the laptop got its backlog")
        for (_, delivered) in backlog { XCTAssertGreaterThanOrEqual(delivered, offline.atMs + offline.forMs, "after coming back") }
    }

    func testOneShotSendWhileTheReceiverIsOffline() async throws {
        let run = try await runDevices("oneshot-send-mid-offline")
        XCTAssertEqual(run.report.sent, 303)
        let oneShot = run.messages.filter { $0.from.hasPrefix("receiver1") }
        XCTAssertEqual(oneShot.map(\.fate), [.receipted, .receipted, .receipted])
        XCTAssertEqual(oneShot.filter { $0.deliveredMs != nil }.count, 3, "the sender's application got them")
        let backlog = run.messages.filter { $0.to.hasPrefix("receiver1") && $0.sentMs >= 600 && $0.sentMs < 2400 }
        XCTAssertEqual(backlog.filter { $0.devices?["laptop"] != nil }.count, backlog.count, "nothing stored was lost")
    }

    /// More clients than the relay's default login burst (50 per address) all log in from
    /// 127.0.0.1: the lab's relay is configured for its own load.
    func testManyPairsAllLogIn() async throws {
        let scenario = try Suite.decode(
            """
            {"name": "pairs", "workload": {"senders": 30, "receivers": 30, "messages": 2, "intervalMs": 20}}
            """)
        let seen = ProgressLog()
        var options = LabOptions()
        options.progressInterval = .milliseconds(20)
        options.progress = { seen.append($0) }
        let run = try await RealRun.execute(scenario, options: options)
        assertBars(run.report)
        XCTAssertEqual(run.report.sent, 60)
        XCTAssertEqual(run.messages.filter { $0.fate == .receipted }.count, 60)
        XCTAssertEqual(run.report.ended, .settled)
        XCTAssertEqual(seen.entries.last?.total, 60, "progress was reported")
    }
}
