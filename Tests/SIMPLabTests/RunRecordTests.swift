import Foundation
import NIOCore
import SIMPLab
import Synchronization
import XCTest

/// Per-message records (`--messages`) and the simulator's bounds on virtual and wall time.
final class RunRecordTests: XCTestCase {
    func testEveryMessageHasARecordThatAgreesWithTheReport() throws {
        var scenario = try Suite.scenario("loss-10")
        scenario.workload.messages = 200
        let run = Simulation.execute(scenario, seed: 5)
        let report = run.report
        XCTAssertEqual(run.messages.count, report.sent)
        XCTAssertEqual(Set(run.messages.map(\.id)).count, report.sent, "ids are distinct")
        XCTAssertEqual(run.messages.filter { $0.fate == .receipted }.count, report.receipted)
        XCTAssertEqual(run.messages.filter { $0.deliveredMs != nil }.count, report.delivered)
        for message in run.messages where message.fate == .receipted {
            let delivered = try XCTUnwrap(message.deliveredMs), receipted = try XCTUnwrap(message.receiptedMs)
            // The receipt leaves on arrival; delivery may wait for an earlier message (ordering).
            XCTAssertLessThanOrEqual(message.sentMs, delivered)
            XCTAssertLessThanOrEqual(message.sentMs, receipted)
            XCTAssertGreaterThanOrEqual(try XCTUnwrap(message.attempts), 1)
            XCTAssertEqual(try XCTUnwrap(message.latencyMs), receipted - message.sentMs, accuracy: 0.11)
        }
        XCTAssertEqual(
            run.messages.map { max(0, ($0.attempts ?? 1) - 1) }.reduce(0, +), report.retransmits,
            "attempts beyond the first are the retransmissions")
        XCTAssertEqual(run.retransmissions.reduce(0) { $0 + $1.count }, report.retransmits)
        XCTAssertEqual(run.messages.map(\.sentMs), run.messages.map(\.sentMs).sorted(), "in the order sent")
    }

    func testJSONLinesHaveTheDocumentedKeysOnEveryLine() throws {
        var scenario = try Suite.scenario("clean")
        scenario.workload.messages = 10
        let run = Simulation.execute(scenario)
        let lines = MessageRecord.jsonLines(run.messages, scenario: "clean").split(separator: "\n")
        XCTAssertEqual(lines.count, 10)
        for line in lines {
            let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            XCTAssertEqual(
                Set(object.keys),
                [
                    "scenario", "id", "from", "to", "sent", "delivered", "receipted", "failed",
                    "latency", "attempts", "fate",
                ])
            XCTAssertEqual(object["fate"] as? String, "receipted")
            XCTAssertTrue(object["failed"] is NSNull)
        }
    }

    func testSettledRunSaysSo() throws {
        var scenario = try Suite.scenario("clean")
        scenario.workload.messages = 20
        XCTAssertEqual(Simulation.run(scenario).ended, .settled)
    }

    /// The scenario that once ran for minutes: a 12 s blackout under a sender every 5 ms.
    func testLongBlackoutIsBoundedByVirtualTime() throws {
        var scenario = try Suite.scenario("stress/long-blackout")
        var options = LabOptions()
        options.maxVirtualTime = .seconds(8) // inside the blackout (2 s to 14 s of the workload)
        let run = Simulation.execute(scenario, options: options)
        XCTAssertEqual(run.report.ended, .virtualTimeLimit)
        XCTAssertGreaterThan(run.report.unresolved, 0)
        XCTAssertEqual(run.report.failedBars.map(\.name), ["unresolved", "not_settled"])
        XCTAssertTrue(ReportTable.detailed(run.report).contains("virtual-time limit reached"))
        scenario.workload.messages = 10
        XCTAssertEqual(Simulation.run(scenario).ended, .settled, "a short run settles within the default bound")
    }

    func testWallTimeBoundStopsARunAndSaysSo() throws {
        var options = LabOptions()
        options.maxWallTime = .zero
        let run = Simulation.execute(try Suite.scenario("stress/long-blackout"), options: options)
        XCTAssertEqual(run.report.ended, .wallTimeLimit)
        XCTAssertTrue(run.report.json().contains(#""ended":"wall_time_limit""#))
    }

    func testProgressIsReportedDuringASimulation() throws {
        let seen = ProgressLog()
        var options = LabOptions()
        options.progressInterval = .zero
        options.progress = { seen.append($0) }
        var scenario = try Suite.scenario("loss-10")
        scenario.workload.messages = 100
        _ = Simulation.execute(scenario, options: options)
        let last = try XCTUnwrap(seen.entries.last)
        XCTAssertEqual(last.total, 100)
        XCTAssertTrue(last.line.hasPrefix("loss-10  t="), last.line)
        XCTAssertTrue(seen.entries.contains { $0.inFlight > 0 }, "some messages were in flight")
    }
}

/// Progress reports collected from any thread.
final class ProgressLog: Sendable {
    private let stored = Mutex<[LabProgress]>([])
    func append(_ progress: LabProgress) { stored.withLock { $0.append(progress) } }
    var entries: [LabProgress] { stored.withLock { $0 } }
}
