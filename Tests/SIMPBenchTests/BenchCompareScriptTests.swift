import Foundation
import SIMPTestSupport
import XCTest

/// `scripts/bench-compare` and its C tools, without the long comparison (speed is never asserted):
/// the script explains itself and refuses unknown flags, the tools build, `udplimit` reports, and
/// the report computes the bars' ratios from the tools' JSON.
final class BenchCompareScriptTests: XCTestCase {
    private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    func testHelpExplainsTheComparisonAndUnknownFlagsAreRefused() async throws {
        let help = try await run(root.appendingPathComponent("scripts/bench-compare").path, ["--help"])
        XCTAssertEqual(help.status, 0)
        for word in ["--short", "--json", "udplimit", "mosquitto", "simp-bench", "<= 0.4", ">= 3", ">= 0.75", "--tcp-path"] {
            XCTAssertTrue(help.output.contains(word), word)
        }
        let wrong = try await run(root.appendingPathComponent("scripts/bench-compare").path, ["--frobnicate"])
        XCTAssertEqual(wrong.status, 2)
    }

    func testBenchLatencyExplainsItselfAndRefusesWhatItCannotRun() async throws {
        let script = root.appendingPathComponent("scripts/bench-latency").path
        let help = try await run(script, ["--help"])
        XCTAssertEqual(help.status, 0)
        for word in ["VARIANT", "--messages-per-tick", "send -> delivered", "interleaved"] where !help.output.lowercased().contains(word.lowercased())
        {
            XCTFail("--help lacks \(word)")
        }
        let (unknownFlag, noVariant) = (try await run(script, ["--frobnicate"]), try await run(script, []))
        XCTAssertEqual(unknownFlag.status, 2)
        XCTAssertEqual(noVariant.status, 2, "no variant")
    }

    func testBenchReadHoldExplainsItselfAndRefusesUnknownFlags() async throws {
        let script = root.appendingPathComponent("scripts/bench-read-hold").path
        let help = try await run(script, ["--help"])
        XCTAssertEqual(help.status, 0)
        for word in ["--datagram-read-hold", "--holds", "mosquitto", "simpload", "wake-ups"] {
            XCTAssertTrue(help.output.contains(word), word)
        }
        let wrong = try await run(script, ["--frobnicate"])
        XCTAssertEqual(wrong.status, 2)
    }

    func testTheToolsBuildAndUDPLimitReportsOneJSONObject() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bench-compare-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let udplimit = directory.appendingPathComponent("udplimit").path
        let mqttbench = directory.appendingPathComponent("mqttbench").path
        let buildUDPLimit = try await run(
            "/usr/bin/env", ["cc", "-O2", "-pthread", "-o", udplimit, root.appendingPathComponent("tools/udplimit.c").path])
        XCTAssertEqual(buildUDPLimit.status, 0)
        let buildMQTTBench = try await run(
            "/usr/bin/env", ["cc", "-O2", "-pthread", "-o", mqttbench, root.appendingPathComponent("tools/mqttbench.c").path, "-lmosquitto"])
        XCTAssertEqual(buildMQTTBench.status, 0)

        let report = try await run(udplimit, ["0.2", "200"])
        XCTAssertEqual(report.status, 0)
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(report.output.utf8)) as? [String: Any])
        XCTAssertEqual(object["size"] as? Int, 200)
        XCTAssertGreaterThan(try XCTUnwrap(object["delivered_rate"] as? Double), 0, "datagrams went through")
        // With a rate the generator paces itself: about that many datagrams a second arrive.
        let paced = try await run(udplimit, ["0.5", "200", "2000"])
        XCTAssertEqual(paced.status, 0)
        let pacedObject = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(paced.output.utf8)) as? [String: Any])
        XCTAssertEqual(pacedObject["offered_rate"] as? Int, 2000)
        XCTAssertEqual(try XCTUnwrap(pacedObject["delivered_rate"] as? Double), 2000, accuracy: 1000)
        XCTAssertGreaterThan(try XCTUnwrap(pacedObject["forwarder_cpu_us_per_datagram"] as? Double), 0)
        let negativeRate = try await run(udplimit, ["1", "200", "-5"])
        XCTAssertEqual(negativeRate.status, 2, "a negative rate is refused")
        let (mqttHelp, mqttWithoutPort) = (try await run(mqttbench, ["--help"]), try await run(mqttbench, ["--pairs", "3"]))
        XCTAssertEqual(mqttHelp.status, 0)
        XCTAssertEqual(mqttWithoutPort.status, 2, "no --port")
    }

    func testTheReportTakesItsRatiosFromTheToolsJSON() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bench-compare-report-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        func simp(delivered: Double, relayCPU: Double, steps: [(delivered: Double, sustained: Bool)]) -> [String: Any] {
            [
                "delivered_rate": delivered, "bench_cpu_seconds": 1.0, "max_sustained_rate": 99_999,
                "relay": ["cpu_seconds": relayCPU], "latency_us": ["count": 10, "p50": 120, "p99": 900],
                "parameters": ["duration_s": 5, "loops": 2, "receipt_delay_us": 10_000, "receipt_datagrams": true],
                "steps": steps.map { ["delivered_rate": $0.delivered, "sustained": $0.sustained] },
            ]
        }
        let files: [String: [String: Any]] = [
            "udp.json": ["delivered_rate": 200_000, "forwarder_cpu_us_per_datagram": 4.0],
            "udp-rate.json": ["delivered_rate": 10_000, "forwarder_cpu_us_per_datagram": 12.0],
            "mqtt-max.json": [
                "delivered_rate": 20_000, "seconds": 5, "broker_cpu_us_per_message": 15, "bench_cpu_seconds": 1,
                "p50_us": 1_000, "p99_us": 60_000,
            ],
            "mqtt-rate.json": [
                "delivered_rate": 10_000, "seconds": 5, "broker_cpu_us_per_message": 40, "bench_cpu_seconds": 1,
                "p50_us": 100, "p99_us": 500,
            ],
            // Max: the rate delivered at the highest sustained step, not the nominal target.
            "simp-max.json": simp(delivered: 61_000, relayCPU: 2, steps: [(40_000, true), (80_000, false), (60_500, true)]),
            // 50,000 messages in 5 s with 1 s of relay CPU: 20 µs per message.
            "simp-rate.json": simp(delivered: 10_000, relayCPU: 1, steps: []),
            // The C client reaches further; the max-rate bars take its figure.
            "simpload-max.json": simp(delivered: 99_000, relayCPU: 4, steps: [(80_000, true), (99_000, true), (120_000, false)]),
            "simpload-rate.json": simp(delivered: 10_000, relayCPU: 0.75, steps: []),
            // The TCP-path pairs (simp-bench --tcp-path), set beside the UDP pairs.
            "simp-tcp-max.json": simp(delivered: 30_000, relayCPU: 2, steps: [(20_000, true), (30_500, true), (40_000, false)]),
            "simp-tcp-rate.json": simp(delivered: 10_000, relayCPU: 1.5, steps: []),
            // simpload --no-wake-on-arrival's find-max, for information.
            "simpload-max-nowake.json": simp(delivered: 110_000, relayCPU: 4, steps: [(110_000, true), (130_000, false)]),
        ]
        for (name, object) in files {
            try JSONSerialization.data(withJSONObject: object).write(to: directory.appendingPathComponent(name))
        }
        let environment = ["BENCH_JSON": "1", "BENCH_RATE": "10000", "BENCH_PAIRS": "10", "BENCH_SIZE": "200", "BENCH_SECONDS": "5"]
        let reportScript = root.appendingPathComponent("scripts/bench-compare-report.py").path
        let report = try await run("/usr/bin/env", ["python3", reportScript, directory.path], environment: environment)
        XCTAssertEqual(report.status, 0)
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(report.output.utf8)) as? [String: Any])
        let ratios = try XCTUnwrap(object["ratios"] as? [[String: Any]])
        func ratio(_ prefix: String) throws -> (value: Double, met: Bool?) {
            let item = try XCTUnwrap(ratios.first { ($0["name"] as? String)?.hasPrefix(prefix) == true }, prefix)
            return (try XCTUnwrap(item["value"] as? Double), item["met"] as? Bool)
        }
        XCTAssertEqual(try ratio("relay CPU/msg ÷ mosquitto").value, 15.0 / 40, accuracy: 1e-9, "simpload's run")
        XCTAssertEqual(try ratio("relay CPU/msg ÷ mosquitto").met, true, "0.375 is within 0.4")
        XCTAssertEqual(try ratio("relay CPU/msg under simp-bench").value, 0.5, accuracy: 1e-9)
        XCTAssertNil(try ratio("relay CPU/msg under simp-bench").met, "information only")
        XCTAssertEqual(try ratio("SIMP max rate (simpload) ÷ mosquitto").met, true, "4.95 is over 3")
        XCTAssertEqual(try ratio("SIMP max rate (simpload) ÷ mosquitto").value, 99_000.0 / 20_000, accuracy: 1e-9)
        XCTAssertEqual(try ratio("SIMP max rate (simpload) ÷ raw-UDP").value, 99_000.0 / 200_000, accuracy: 1e-9)
        XCTAssertEqual(try ratio("SIMP max rate (simpload) ÷ raw-UDP").met, false, "0.495 is below 0.75")
        XCTAssertEqual(try ratio("SIMP max rate (simp-bench) ÷ mosquitto").value, 60_500.0 / 20_000, accuracy: 1e-9)
        XCTAssertNil(try ratio("SIMP max rate (simp-bench) ÷ raw-UDP").met, "information only")
        XCTAssertEqual(try ratio("raw-UDP forwarder CPU").value, 12.0 / 40, accuracy: 1e-9)
        XCTAssertEqual(try ratio("SIMP best delivered rate").value, 120_000.0 / 20_000, accuracy: 1e-9)
        XCTAssertEqual(try ratio("TCP path ÷ UDP: max rate").value, 30_500.0 / 60_500, accuracy: 1e-9)
        XCTAssertNil(try ratio("TCP path ÷ UDP: max rate").met, "information only")
        XCTAssertEqual(try ratio("TCP path ÷ UDP: relay CPU/msg").value, 1.5, accuracy: 1e-9)
        let rows = try XCTUnwrap(object["rows"] as? [[String: Any]])
        XCTAssertTrue(rows.contains { ($0["system"] as? String)?.hasPrefix("SIMP relay, TCP path") == true }, "its own row")
        // Who used the CPU at the max rate: 4 s of relay and 1 s of generator over 99,000 × 5 messages.
        let simpload = try XCTUnwrap(rows.first { ($0["system"] as? String)?.hasPrefix("SIMP relay (simpload, C client") == true })
        XCTAssertEqual(try XCTUnwrap(simpload["max_server_cpu_us_per_message"] as? Double), 4e6 / 495_000, accuracy: 1e-9)
        XCTAssertEqual(try XCTUnwrap(simpload["max_bench_cpu_us_per_message"] as? Double), 1e6 / 495_000, accuracy: 1e-9)
        let mosquitto = try XCTUnwrap(rows.first { ($0["system"] as? String)?.hasPrefix("mosquitto") == true })
        XCTAssertEqual(mosquitto["max_server_cpu_us_per_message"] as? Double, 15)
        XCTAssertEqual(try ratio("SIMP max rate (simpload --no-wake-on-arrival) ÷ mosquitto").value, 110_000.0 / 20_000, accuracy: 1e-9)
        XCTAssertNil(try ratio("SIMP max rate (simpload --no-wake-on-arrival) ÷ mosquitto").met, "information only")
        // The table prints the same columns.
        var table = environment
        table["BENCH_JSON"] = "0"
        let printed = try await run("/usr/bin/env", ["python3", reportScript, directory.path], environment: table)
        XCTAssertEqual(printed.status, 0)
        XCTAssertTrue(printed.output.contains("generator CPU µs/msg at max"), printed.output)
    }

    private func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) async throws
        -> (status: Int32, output: String)
    {
        try await ToolProcess.outcome(URL(fileURLWithPath: executable), arguments, environment: environment)
    }
}
