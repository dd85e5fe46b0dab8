import Foundation
import NIOCore
@testable import SIMPBench
import XCTest

/// The bench's measuring parts: percentiles, /proc readings, Prometheus text, the report.
final class ReportingTests: XCTestCase {
    func testLatencyPercentilesFollowTheRecordedDistribution() {
        var recorder = LatencyRecorder()
        for micros in 1...1000 { recorder.record(.microseconds(Int64(micros))) }
        let summary = recorder.summary
        XCTAssertEqual(summary.count, 1000)
        XCTAssertEqual(Double(summary.p50), 500, accuracy: 1)
        XCTAssertEqual(Double(summary.p99), 990, accuracy: 1)
        XCTAssertEqual(Double(summary.max), 1000, accuracy: 1)
        XCTAssertLessThanOrEqual(summary.p95, summary.p99)
        XCTAssertLessThanOrEqual(summary.p99, summary.p999)
    }

    func testEmptyRecorderSummarisesToZero() {
        XCTAssertEqual(LatencyRecorder().summary, LatencySummary(count: 0, p50: 0, p95: 0, p99: 0, p999: 0, max: 0))
    }

    func testCPUTimeIsReadAfterTheCommandName() {
        // A command name with spaces and a parenthesis must not shift the fields.
        let line = "4242 (simp server) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 2 0 100 1000 200"
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        XCTAssertEqual(ProcessStats.cpuSeconds(statLine: line)!, 300 / ticks, accuracy: 1e-9)
        XCTAssertNil(ProcessStats.cpuSeconds(statLine: "garbage"))
    }

    func testOwnProcessStatsAreReadable() throws {
        let stats = try XCTUnwrap(ProcessStats.read(pid: getpid()))
        XCTAssertGreaterThan(stats.rssBytes, 0)
        XCTAssertGreaterThanOrEqual(stats.peakRSSBytes, stats.rssBytes)
    }

    func testPrometheusTextIsParsedPerSeriesAndSummed() {
        let scrape = MetricsScrape(text: """
            # TYPE simp_rejected_total counter
            simp_rejected_total{reason="malformed"} 3
            simp_rejected_total{reason="draining"} 2
            simp_datagrams_forwarded_total 1.5e3
            not a sample
            """)
        XCTAssertEqual(scrape["simp_rejected_total{reason=\"malformed\"}"], 3)
        XCTAssertEqual(scrape.total("simp_rejected_total"), 5)
        XCTAssertEqual(scrape.total("simp_datagrams_forwarded_total"), 1500)
        XCTAssertEqual(scrape.total("simp_datagrams"), 0, "a prefix of a name is another metric")
    }

    func testReportJSONIsOneObjectWithTheDocumentedKeys() throws {
        var result = LoadResult(targetRate: 100, seconds: 2)
        result.offered = 200
        result.skipped = 4
        result.delivered = 198
        result.receipts = 196
        result.latency.record(.microseconds(80))
        let parameters = BenchReport.Parameters(mode: "load", relay: "x", pairs: 1, rate: 100, size: 200,
                                                durationSeconds: 2, warmupSeconds: 0, messagesPerTick: 1, receiptDelayUs: 0, sessions: nil)
        let report = BenchReport(parameters: parameters, result: result)
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(report.json().utf8)) as? [String: Any])
        XCTAssertEqual(object["offered_rate"] as? Double, 100)
        XCTAssertEqual(object["delivered_rate"] as? Double, 99)
        XCTAssertEqual(object["receipt_rate"] as? Double, 98)
        XCTAssertEqual(object["skipped"] as? Int, 4)
        for key in ["failed", "duplicates", "latency_us", "receipt_rtt_us", "machine"] { XCTAssertNotNil(object[key], key) }
        let latency = try XCTUnwrap(object["latency_us"] as? [String: Any])
        for key in ["p50", "p95", "p99", "p999", "max"] { XCTAssertNotNil(latency[key], key) }
        XCTAssertTrue(report.table().contains("delivered_rate"))
    }
}
