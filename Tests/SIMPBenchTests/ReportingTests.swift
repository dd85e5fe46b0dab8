import Foundation
import NIOCore
import XCTest

@testable import SIMPBench

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
        let scrape = MetricsScrape(
            text: """
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
        let parameters = BenchReport.Parameters(
            mode: "load", relay: "x", pairs: 1, rate: 100, size: 200,
            durationSeconds: 2, warmupSeconds: 0, messagesPerTick: 1, receiptDelayUs: 0,
            receiptDatagrams: true, loops: 2, sessions: nil)
        let report = BenchReport(parameters: parameters, result: result)
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(report.json().utf8)) as? [String: Any])
        XCTAssertEqual(object["offered_rate"] as? Double, 100)
        XCTAssertEqual(object["delivered_rate"] as? Double, 99)
        XCTAssertEqual(object["receipt_rate"] as? Double, 98)
        XCTAssertEqual(object["skipped"] as? Int, 4)
        XCTAssertEqual((object["parameters"] as? [String: Any])?["loops"] as? Int, 2)
        for key in ["failed", "duplicates", "latency_us", "receipt_rtt_us", "machine"] { XCTAssertNotNil(object[key], key) }
        let latency = try XCTUnwrap(object["latency_us"] as? [String: Any])
        for key in ["p50", "p95", "p99", "p999", "max"] { XCTAssertNotNil(latency[key], key) }
        XCTAssertTrue(report.table().contains("delivered_rate"))
    }

    /// `--sessions` reports what each session costs: RSS over the relay's baseline, CPU per
    /// 10,000 sessions, Redis commands per session per second and Redis memory per session.
    func testIdleSessionCostsArePerSession() throws {
        var sessions = BenchReport.Sessions(connected: 2000, connectSeconds: 1, relayRSSBytes: nil, relayBaselineRSSBytes: nil)
        let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
        sessions.addIdleCosts(
            relays: [.init(sessions: 2000, baselineRSSBytes: 30_000_000, rssBytes: 38_000_000, cpuSeconds: 0.6)], // 60 s at 1 % of a core
            window: .seconds(60),
            redis: (
                RedisStats(commandsProcessed: 100, usedMemoryBytes: 1_000_000, at: t0),
                RedisStats(commandsProcessed: 5_000, usedMemoryBytes: 3_000_000, at: t0 + .seconds(1)),
                RedisStats(commandsProcessed: 5_120, usedMemoryBytes: 3_000_000, at: t0 + .seconds(61))
            ),
            kernel: (KernelMemory(tcpBufferBytes: 0, slabBytes: 10_000_000), KernelMemory(tcpBufferBytes: 4096, slabBytes: 30_000_000)))
        XCTAssertEqual(sessions.rssBytesPerSession, 4000)
        XCTAssertEqual(try XCTUnwrap(sessions.relayCPUPercentPer10kSessions), 5, accuracy: 1e-9)
        XCTAssertEqual(try XCTUnwrap(sessions.redisCommandsPerSecond), 2, accuracy: 1e-9)
        XCTAssertEqual(try XCTUnwrap(sessions.redisCommandsPerSessionPerSecond), 0.001, accuracy: 1e-12)
        XCTAssertEqual(sessions.redisMemoryBytesPerSession, 1000)
        XCTAssertEqual(sessions.kernelSlabBytesPerSession, 10_000)
        XCTAssertEqual(sessions.kernelTCPBufferBytes, 4096)
        XCTAssertEqual(
            RedisStats.field("total_commands_processed", in: "# Stats\r\ntotal_connections_received:3\r\ntotal_commands_processed:42\r\n"), 42)
    }

    /// Over several relays, each relay's share is given per session of its own, and the totals
    /// add the relays up.
    func testIdleSessionCostsArePerRelayAndInTotal() throws {
        var sessions = BenchReport.Sessions(connected: 3000, connectSeconds: 1, relayRSSBytes: nil, relayBaselineRSSBytes: nil)
        sessions.addIdleCosts(
            relays: [
                .init(sessions: 2000, baselineRSSBytes: 30_000_000, rssBytes: 38_000_000, cpuSeconds: 1.0),
                .init(sessions: 1000, baselineRSSBytes: 30_000_000, rssBytes: 33_000_000, cpuSeconds: 0.5),
            ],
            window: .seconds(10), redis: (nil, nil, nil))
        XCTAssertEqual(sessions.relays.map(\.rssBytesPerSession), [4000, 3000])
        XCTAssertEqual(try XCTUnwrap(sessions.relays[1].cores), 0.05, accuracy: 1e-12)
        XCTAssertEqual(sessions.relayRSSBytes, 71_000_000)
        XCTAssertEqual(sessions.rssBytesPerSession, 11_000_000 / 3000)
        XCTAssertEqual(try XCTUnwrap(sessions.relayCores), 0.15, accuracy: 1e-12)
        XCTAssertEqual(try XCTUnwrap(sessions.relayCPUPercentPer10kSessions), 50, accuracy: 1e-9)
    }

    func testKernelTCPPagesAreReadFromSockstat() {
        let sockstat = "sockets: used 120\nTCP: inuse 5 orphan 0 tw 3 alloc 9 mem 17\nUDP: inuse 2 mem 1\n"
        XCTAssertEqual(KernelMemory.tcpPages(sockstat: sockstat), 17)
        XCTAssertNil(KernelMemory.tcpPages(sockstat: "UDP: inuse 2 mem 1\n"))
        XCTAssertNotNil(KernelMemory.read())
    }

    func testMergedResultsAddCountsAndSamplesAndKeepTheWorstLag() {
        var a = LoadResult(targetRate: 600, seconds: 2)
        a.offered = 1200
        a.delivered = 1190
        a.receipts = 1180
        a.receiptFrames = 100
        a.receiptDatagrams = 100
        a.receiptDatagramsArrived = 99
        a.receiptsFirstByDatagram = 300
        a.skipped = 1
        a.failed = 2
        a.unresolved = 3
        a.suppressed = 4
        a.retransmits = 5
        a.generatorMaxLag = .microseconds(300)
        a.smoothedRTT = .microseconds(100)
        for micros: Int64 in [10, 20, 30] { a.latency.record(.microseconds(micros)) }
        a.receiptRTT.record(.microseconds(50))
        var b = LoadResult(targetRate: 400, seconds: 2)
        b.offered = 800
        b.delivered = 800
        b.receipts = 790
        b.receiptFrames = 80
        b.duplicates = 1
        b.retransmits = 7
        b.generatorMaxLag = .microseconds(900)
        b.smoothedRTT = .microseconds(300)
        b.latency.record(.microseconds(5000))
        let idle = LoadResult(targetRate: 0, seconds: 2) // no smoothed RTT: not in the average

        let merged = LoadResult.merged([a, b, idle])
        XCTAssertEqual(merged.targetRate, 1000)
        XCTAssertEqual(merged.seconds, 2)
        XCTAssertEqual(merged.offered, 2000)
        XCTAssertEqual(merged.delivered, 1990)
        XCTAssertEqual(merged.receipts, 1970)
        XCTAssertEqual(merged.receiptFrames, 180)
        XCTAssertEqual(merged.receiptDatagrams, 100)
        XCTAssertEqual(merged.receiptDatagramsArrived, 99)
        XCTAssertEqual(merged.receiptsFirstByDatagram, 300)
        XCTAssertEqual([merged.skipped, merged.failed, merged.unresolved, merged.duplicates, merged.suppressed], [1, 2, 3, 1, 4])
        XCTAssertEqual(merged.retransmits, 12)
        XCTAssertEqual(merged.generatorMaxLag, .microseconds(900))
        XCTAssertEqual(merged.smoothedRTT, .microseconds(200))
        XCTAssertEqual(merged.latency.count, 4)
        XCTAssertEqual(merged.latency.summary.max, 5000, accuracy: 5)
        XCTAssertEqual(merged.latency.summary.p50, 20, accuracy: 1)
        XCTAssertEqual(merged.receiptRTT.count, 1)
    }
}
