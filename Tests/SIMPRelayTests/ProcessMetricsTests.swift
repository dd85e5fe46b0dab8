import Foundation
import SIMPBench
import SIMPTestSupport
import XCTest

@testable import SIMPRelay

#if canImport(Glibc)
import Glibc
#endif

/// `process_*` on /metrics. The test relay runs in the test process, so its figures are the
/// test's own and can be checked against what the test does and reads itself.
final class ProcessMetricsTests: XCTestCase {
    func testProcessFiguresFollowTheProcess() async throws {
        let relay = try await TestRelay.start { $0.metricsPort = 0 }
        var pipes: [Int32] = []
        do {
            let port = try XCTUnwrap(relay.server.metricsAddress?.port)
            func scrape() async throws -> PrometheusExposition {
                PrometheusExposition(text: try await MetricsScrape.fetch(host: "127.0.0.1", port: port).text)
            }
            let first = try await scrape()
            for _ in 0..<20 {
                var ends: [Int32] = [0, 0]
                XCTAssertEqual(pipe(&ends), 0)
                pipes += ends
            }
            // Burn 0.2 s of this thread's CPU time, so the process counter must move by as much.
            var spin = 0.0
            let until = Self.threadCPUSeconds() + 0.2
            while Self.threadCPUSeconds() < until { spin += sin(spin) }
            let second = try await scrape()

            let opened = try XCTUnwrap(second.value("process_open_fds")) - XCTUnwrap(first.value("process_open_fds"))
            XCTAssertEqual(opened, 40, accuracy: 2, "20 pipes are 40 descriptors")
            var limit = rlimit()
            getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
            XCTAssertEqual(second.value("process_max_fds"), Double(limit.rlim_cur))
            let cpu = try XCTUnwrap(second.value("process_cpu_seconds_total")) - XCTUnwrap(first.value("process_cpu_seconds_total"))
            XCTAssertGreaterThanOrEqual(cpu, 0.18, "0.2 s of CPU was spent between the scrapes (spin \(spin))")
            let resident = try XCTUnwrap(second.value("process_resident_memory_bytes"))
            XCTAssertEqual(resident, Double(Self.statusKilobytes("VmRSS:") * 1024), accuracy: 16 * 1024 * 1024)
            XCTAssertGreaterThan(try XCTUnwrap(second.value("process_virtual_memory_bytes")), resident)
            let started = try XCTUnwrap(second.value("process_start_time_seconds"))
            let now = Date().timeIntervalSince1970
            XCTAssertLessThan(started, now - 0.2)
            XCTAssertGreaterThan(started, now - 3600, "the test process started within the hour")
            XCTAssertEqual(first.value("process_start_time_seconds")!, started, accuracy: 0.05, "a fixed point in time")
        } catch {
            for pipe in pipes { close(pipe) }
            await relay.stop()
            throw error
        }
        for pipe in pipes { close(pipe) }
        await relay.stop()
    }

    func testStatLineFieldsAreReadAfterTheCommandName() throws {
        // A command name with spaces and parentheses; utime 250, stime 50, starttime 1000,
        // vsize 123456789, rss 300 pages.
        let line = "4242 (simp (relay) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 1000 123456789 300 18446744073709551615"
        let sample = try XCTUnwrap(ProcessSample(statLine: line, clockTicksPerSecond: 100, pageSize: 4096, bootTime: 1_700_000_000))
        XCTAssertEqual(sample.cpuSeconds, 3.0)
        XCTAssertEqual(sample.startTimeSeconds, 1_700_000_010)
        XCTAssertEqual(sample.virtualBytes, 123_456_789)
        XCTAssertEqual(sample.residentBytes, 300 * 4096)
        XCTAssertNil(ProcessSample(statLine: "4242 (cut short) S 1 2", clockTicksPerSecond: 100, pageSize: 4096, bootTime: 0))
        XCTAssertNil(ProcessSample(statLine: "no parenthesis", clockTicksPerSecond: 100, pageSize: 4096, bootTime: 0))
    }

    private static func threadCPUSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    private static func statusKilobytes(_ key: String) -> Int {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix(key) } ?? ""
        return Int(line.dropFirst(key.count).split(whereSeparator: \.isWhitespace).first ?? "") ?? 0
    }
}
