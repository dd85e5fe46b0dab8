import Foundation
import NIOCore
import SIMPLab
import XCTest

final class SimulationTests: XCTestCase {
    private func lossy(messages: Int = 300) throws -> Scenario {
        var scenario = try Suite.scenario("loss-10")
        scenario.workload.messages = messages
        return scenario
    }

    func testSameSeedGivesAnIdenticalReport() throws {
        let scenario = try lossy()
        let first = Simulation.run(scenario, seed: 42)
        let second = Simulation.run(scenario, seed: 42)
        XCTAssertEqual(first, second)
        XCTAssertEqual(first.json(), second.json())
        XCTAssertNotEqual(first, Simulation.run(scenario, seed: 43), "another seed, other losses")
    }

    func testCleanLinkDeliversEverythingWithoutRetransmitting() throws {
        var scenario = try Suite.scenario("clean")
        scenario.workload.messages = 200
        let report = Simulation.run(scenario)
        XCTAssertEqual(report.sent, 200)
        XCTAssertEqual(report.delivered, 200)
        XCTAssertEqual(report.receipted, 200)
        XCTAssertEqual(report.retransmits, 0)
        XCTAssertEqual(report.datagramsPerMessage, 1)
        // Four link hops of 10-15 ms each way, and the receipt's wait for others (10 ms).
        let latency = try XCTUnwrap(report.latency)
        XCTAssertGreaterThanOrEqual(latency.p50, 50)
        XCTAssertLessThanOrEqual(latency.max, 70)
        XCTAssertTrue(report.passed)
    }

    func testLossCostsRetransmissionsButEverythingArrives() throws {
        let report = Simulation.run(try lossy())
        XCTAssertEqual(report.delivered, report.sent)
        XCTAssertGreaterThan(report.retransmits, 0)
        XCTAssertEqual(report.datagramsSent, report.sent + 2 * report.retransmits, "each retransmission goes out twice")
        XCTAssertGreaterThan(report.latency!.max, report.latency!.p50)
    }

    func testAnUnreachableReceiverFailsEveryMessageAndSaysSo() throws {
        var scenario = try Suite.decode(
            """
            {"name": "dead", "workload": {"messages": 20},
             "receiverLink": {"down": {"blackouts": [{"atMs": 0, "forMs": 3600000}]}}}
            """)
        scenario.retransmit = RetransmitOverrides(maxAttempts: 3)
        let report = Simulation.run(scenario)
        XCTAssertEqual(report.sent, 20)
        XCTAssertEqual(report.delivered, 0)
        XCTAssertEqual(report.failed, 20)
        XCTAssertEqual(report.unresolved, 0)
        XCTAssertFalse(report.bars.contains { $0.name == "failed" }, "a link that never recovers may fail messages")
        XCTAssertTrue(report.passed)
        var recovering = scenario
        recovering.receiverLink = AccessLink(down: LinkConditions())
        recovering.expect.noFailures = true
        recovering.link.down.blackouts = [.init(atMs: 200, forMs: 3_600_000)]
        // Only the sender's downlink dies here (once it has fetched the receiver's keys, which
        // sealing the first message takes): the receiver gets every message, and the sender,
        // hearing no receipt, gives up after 3 transmissions (a count cap, for tests):
        // delivered and reported failed, which the lab never accepts.
        XCTAssertEqual(
            Simulation.run(recovering).failedBars.map(\.name), ["delivered_and_failed", "failed"],
            "unless the scenario says none may fail")
    }

    func testReportJSONHasTheDocumentedFields() throws {
        let report = Simulation.run(try lossy(messages: 50))
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(report.json().utf8)) as? [String: Any])
        for key in [
            "scenario", "mode", "seed", "sent", "delivered", "failed", "duplicates", "out_of_order",
            "latency_ms", "datagrams_sent", "datagrams_per_message", "retransmits", "spurious_retransmits",
            "unencrypted", "decryption_failures",
        ] {
            XCTAssertNotNil(object[key], key)
        }
        let latency = try XCTUnwrap(object["latency_ms"] as? [String: Any])
        XCTAssertEqual(Set(latency.keys), ["p50", "p95", "p99", "max", "mean"])
        XCTAssertEqual(object["mode"] as? String, "sim")
    }

    func testTableAndSummaryShowTheReport() throws {
        let report = Simulation.run(try lossy(messages: 50))
        let table = ReportTable.detailed(report)
        for label in ["scenario", "delivered", "out_of_order", "latency_ms", "datagrams_per_message", "result"] {
            XCTAssertTrue(table.contains(label), label)
        }
        let summary = ReportTable.summary([report, report]).split(separator: "\n")
        XCTAssertEqual(summary.count, report.passed ? 3 : 5, summary.joined(separator: "\n"))
        XCTAssertTrue(summary[1].hasPrefix("loss-10"))
    }
}
