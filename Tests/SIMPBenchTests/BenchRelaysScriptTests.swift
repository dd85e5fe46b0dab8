import Foundation
import SIMPTestSupport
import XCTest

/// `scripts/bench-relays` (one relay against two through Redis pub/sub) and
/// `scripts/bench-threads --model` (the scaling model of `--threads`), without measuring (speed is
/// never asserted): they explain themselves, refuse unknown flags, and their reports compute the
/// ratios and the model from fixed JSON.
final class BenchRelaysScriptTests: XCTestCase {
    private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    func testBothScriptsExplainThemselvesAndRefuseUnknownFlags() async throws {
        let relays = root.appendingPathComponent("scripts/bench-relays").path
        let help = try await run(relays, ["--help"])
        XCTAssertEqual(help.status, 0)
        for word in ["--receiver-port", "Redis PUBLISH", ">= 0.8", "--find-max", "round trips", "--json"] {
            XCTAssertTrue(help.output.contains(word), word)
        }
        let unknown = try await run(relays, ["--frobnicate"])
        XCTAssertEqual(unknown.status, 2)
        let threads = try await run(root.appendingPathComponent("scripts/bench-threads").path, ["--help"])
        XCTAssertEqual(threads.status, 0)
        for word in ["--model", "c_handoff", "(N-1)/N", "--placement same", "pinned"] {
            XCTAssertTrue(threads.output.contains(word), word)
        }
    }

    func testTheRelaysReportTakesTheRatioAndWhereTheCPUGoesFromTheRuns() async throws {
        let directory = try temporaryDirectory("bench-relays-report")
        // Fixed-rate runs: 5,000 msg/s delivered for 5 s = 25,000 messages.
        func fixed(relayA: Double, relayB: Double, redis: Double) -> [String: Any] {
            [
                "delivered_rate": 5_000, "latency_us": ["p50": 150, "p99": 900], "parameters": ["duration_s": 5],
                "relay": ["cpu_seconds": relayA, "threads": []], "receiver_relay": ["cpu_seconds": relayB],
                "redis": ["cpu_seconds": redis],
            ]
        }
        let files: [String: [String: Any]] = [
            "round1-one-max.json": ["max_sustained_rate": 40_000],
            "round1-two-max.json": ["max_sustained_rate": 30_000], // 0.75: below the bar
            "round2-one-max.json": ["max_sustained_rate": 40_000],
            "round2-two-max.json": ["max_sustained_rate": 36_000], // 0.9
            "round1-one-rate.json": fixed(relayA: 0.5, relayB: 0, redis: 0), // 20 µs per message
            "round1-two-rate.json": fixed(relayA: 0.5, relayB: 0.375, redis: 0.25), // 20 + 15, Redis 10
            "round2-one-rate.json": fixed(relayA: 0.5, relayB: 0, redis: 0),
            "round2-two-rate.json": fixed(relayA: 0.625, relayB: 0.375, redis: 0.25), // 25 + 15
        ]
        for (name, object) in files {
            try JSONSerialization.data(withJSONObject: object).write(to: directory.appendingPathComponent(name))
        }
        // /metrics around each fixed-rate run. Two relays: 5,000 round trips, 50,000 datagrams
        // forwarded (A: receipt copies, B: messages), 27,000 deliveries published.
        let help = "# HELP simp_redis_calls_total Redis round trips.\n# TYPE simp_redis_calls_total counter\n"
        func metrics(calls: Int, forwarded: Int, published: Int) -> String {
            help + "simp_redis_calls_total \(calls)\nsimp_datagrams_forwarded_total \(forwarded)\n"
                + "simp_relay_deliveries_published_total \(published)\nsimp_rejected_total{reason=\"malformed\"} 7\n"
        }
        for round in 1...2 {
            let texts = [
                "one-before-a": metrics(calls: 10, forwarded: 100, published: 0),
                "one-after-a": metrics(calls: 20, forwarded: 50_100, published: 0),
                "one-before-b": metrics(calls: 5, forwarded: 0, published: 0),
                "one-after-b": metrics(calls: 5, forwarded: 0, published: 0),
                "two-before-a": metrics(calls: 100, forwarded: 0, published: 0),
                "two-after-a": metrics(calls: 2_100, forwarded: 25_000, published: 25_000),
                "two-before-b": metrics(calls: 0, forwarded: 0, published: 0),
                "two-after-b": metrics(calls: 3_000, forwarded: 25_000, published: 2_000),
            ]
            for (name, text) in texts {
                try text.write(to: directory.appendingPathComponent("round\(round)-\(name).txt"), atomically: true, encoding: .utf8)
            }
        }
        let report = try await run(
            "/usr/bin/env", ["python3", root.appendingPathComponent("scripts/bench-relays-report.py").path, directory.path],
            environment: ["BENCH_JSON": "1", "BENCH_ROUNDS": "2", "BENCH_RATE": "5000"])
        XCTAssertEqual(report.status, 0)
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(report.output.utf8)) as? [String: Any])
        let rounds = try XCTUnwrap(object["rounds"] as? [[String: Any]])
        XCTAssertEqual(try XCTUnwrap(rounds[0]["max_rate_ratio"] as? Double), 0.75, accuracy: 1e-9)
        XCTAssertEqual(rounds[0]["met"] as? Bool, false)
        XCTAssertEqual(rounds[1]["met"] as? Bool, true)
        XCTAssertEqual(rounds[1]["first"] as? String, "two", "the order alternates")
        let two = try XCTUnwrap(rounds[0]["two"] as? [String: Any])
        XCTAssertEqual(try XCTUnwrap(two["relays_cpu_us_per_message"] as? Double), 35, accuracy: 1e-9)
        XCTAssertEqual(try XCTUnwrap(two["redis_cpu_us_per_message"] as? Double), 10, accuracy: 1e-9)
        XCTAssertEqual(try XCTUnwrap(two["redis_calls_per_forwarded"] as? Double), 0.1, accuracy: 1e-9)
        XCTAssertEqual(try XCTUnwrap(two["published_per_redis_call"] as? Double), 5.4, accuracy: 1e-9)
        let one = try XCTUnwrap(rounds[0]["one"] as? [String: Any])
        XCTAssertEqual(try XCTUnwrap(one["redis_calls_per_forwarded"] as? Double), 10.0 / 50_000, accuracy: 1e-12)
        XCTAssertEqual(try XCTUnwrap(rounds[1]["cpu_ratio"] as? Double), 40.0 / 20, accuracy: 1e-9)
        let summary = try XCTUnwrap(object["summary"] as? [String: Any])
        let ratio = try XCTUnwrap(summary["max_rate_ratio"] as? [String: Double])
        XCTAssertEqual(try XCTUnwrap(ratio["median"]), 0.825, accuracy: 1e-9)
        XCTAssertEqual(summary["met"] as? Bool, true, "the median meets the bar")
        XCTAssertEqual(summary["rounds_met"] as? Int, 1)
        let table = try await run(
            "/usr/bin/env", ["python3", root.appendingPathComponent("scripts/bench-relays-report.py").path, directory.path],
            environment: ["BENCH_ROUNDS": "2", "BENCH_RATE": "5000"])
        XCTAssertTrue(table.output.contains("median ratio 0.82"), table.output)
        XCTAssertTrue(table.output.contains("| 1 | 2 | 30,000 | 20.0 / 15.0 / 10.0 |"), table.output)
    }

    func testTheThreadsModelComesFromTheMeasuredCostsPerMessage() async throws {
        let directory = try temporaryDirectory("threads-model")
        // 10,000 msg/s delivered for 5 s = 50,000 messages.
        func run(cpu: Double, threads: [Double], crossing: Int?) -> [String: Any] {
            var report: [String: Any] = [
                "delivered_rate": 10_000, "parameters": ["duration_s": 5, "pairs": 10],
                "relay": ["cpu_seconds": cpu, "threads": threads.map { ["cpu_seconds": $0] }],
            ]
            if let crossing { report["cross_loop_pairs"] = crossing }
            return report
        }
        let files: [String: [String: Any]] = [
            "round1-t1-any.json": run(cpu: 0.5, threads: [0.5], crossing: nil), // 10 µs
            "round1-t2-same.json": run(cpu: 0.6, threads: [0.3, 0.3], crossing: 0), // c_local 12 µs
            "round1-t2-cross.json": run(cpu: 0.9, threads: [0.5, 0.4], crossing: 10), // 18 µs: c_handoff 6
        ]
        for (name, object) in files {
            try JSONSerialization.data(withJSONObject: object).write(to: directory.appendingPathComponent(name))
        }
        let script = root.appendingPathComponent("scripts/threads-model.py").path
        let report = try await self.run("/usr/bin/env", ["python3", script, directory.path], environment: ["BENCH_JSON": "1", "BENCH_ROUNDS": "1"])
        XCTAssertEqual(report.status, 0)
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(report.output.utf8)) as? [String: Any])
        XCTAssertEqual(try XCTUnwrap(object["c_one_loop_us"] as? Double), 10, accuracy: 1e-9)
        XCTAssertEqual(try XCTUnwrap(object["c_local_us"] as? Double), 12, accuracy: 1e-9)
        XCTAssertEqual(try XCTUnwrap(object["c_handoff_us"] as? Double), 6, accuracy: 1e-9)
        let rows = try XCTUnwrap(object["rows"] as? [[String: Any]])
        func row(_ loops: Int) throws -> [String: Any] { try XCTUnwrap(rows.first { $0["loops"] as? Int == loops }) }
        // 2 loops, hashed: 2 / (12 + 0.5 * 6) µs; pinned: 2 / 12 µs.
        XCTAssertEqual(try XCTUnwrap(try row(2)["hashed_rate"] as? Double), 2 / 15e-6, accuracy: 1e-3)
        XCTAssertEqual(try XCTUnwrap(try row(2)["pinned_rate"] as? Double), 2 / 12e-6, accuracy: 1e-3)
        // 4 loops: p_cross 3/4, 4 / (12 + 4.5) µs, 4 x 12 / 16.5 the speed-up of one loop's 1 / 12 µs.
        XCTAssertEqual(try XCTUnwrap(try row(4)["p_cross"] as? Double), 0.75, accuracy: 1e-12)
        XCTAssertEqual(try XCTUnwrap(try row(4)["hashed_rate"] as? Double), 4 / 16.5e-6, accuracy: 1e-3)
        XCTAssertEqual(try XCTUnwrap(try row(4)["hashed_speedup"] as? Double), 4 * 12 / 16.5, accuracy: 1e-9)
        XCTAssertEqual(try XCTUnwrap(try row(1)["pinned_over_hashed"] as? Double), 1, accuracy: 1e-12, "one loop hands nothing over")
    }

    private func temporaryDirectory(_ name: String) throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        return directory
    }

    private func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) async throws
        -> (status: Int32, output: String)
    {
        try await ToolProcess.outcome(URL(fileURLWithPath: executable), arguments, environment: environment)
    }
}
