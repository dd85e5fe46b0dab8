import Foundation
import SIMPRelay
import SIMPTestSupport
import XCTest

/// tools/simpload.c, the C SIMP client scripts/bench-compare measures the relay's limit with,
/// written from docs/PROTOCOL.md: built here and run against a real relay and Redis.
final class SimploadTests: RelayTestCase {
    private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    override func configureRelay(_ configuration: inout RelayConfiguration) {
        configuration.requireLogin = false
    }

    func testEveryMessageIsDeliveredOnceAndReceipted() async throws {
        let simpload = try await build()
        // 3 pairs on 2 worker threads, 600 msg/s for 1 s: under the relay's 500 msg/s per user.
        let result = try await run(
            simpload,
            [
                "--port", String(relay.port), "--pairs", "3", "--rate", "600", "--seconds", "1",
                "--warmup", "0.3", "--workers", "2",
            ])
        XCTAssertEqual(result.status, 0, result.errors)
        let report = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any])
        let parameters = try XCTUnwrap(report["parameters"] as? [String: Any])
        XCTAssertEqual(parameters["datagram_bytes"] as? Int, 200, "sealed TEXT datagrams of --size bytes")
        assertOffered(try XCTUnwrap(report["offered_rate"] as? Double), asked: 600)
        XCTAssertEqual(report["delivered_rate"] as? Double, report["offered_rate"] as? Double, "every message sent in the window arrived")
        XCTAssertEqual(try XCTUnwrap(report["receipt_rate"] as? Double), 600, accuracy: 60)
        XCTAssertEqual(report["unresolved"] as? Int, 0, "every message was receipted")
        XCTAssertEqual(report["duplicates"] as? Int, 0)
        let stats = try await relay.server.statistics()
        XCTAssertGreaterThan(stats.receiptsRouted, 0, "receipt frames went through the relay")
        XCTAssertLessThan(stats.receiptsRouted * 3, stats.datagramsForwarded, "batches: a frame covers several messages")
        XCTAssertTrue(stats.rejected.isEmpty, "nothing rejected: \(stats.rejected)")
    }

    /// With `--no-wake-on-arrival` a worker reads only once a tick, yet every message is still
    /// delivered once and receipted; the report gives the relay's and the generator's CPU per
    /// delivered message (this test's relay runs in the test process, so `--relay-pid` is ours).
    func testReadingOnlyOnceATickStillDeliversEveryMessageOnceAndReportsBothCPUs() async throws {
        let simpload = try await build()
        let result = try await run(
            simpload,
            [
                "--port", String(relay.port), "--pairs", "3", "--rate", "600", "--seconds", "1", "--warmup", "0.3",
                "--workers", "2", "--no-wake-on-arrival", "--relay-pid", String(getpid()),
            ])
        XCTAssertEqual(result.status, 0, result.errors)
        let report = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any])
        XCTAssertEqual((report["parameters"] as? [String: Any])?["wake_on_arrival"] as? Bool, false)
        let offered = try XCTUnwrap(report["offered_rate"] as? Double)
        assertOffered(offered, asked: 600)
        XCTAssertEqual(report["delivered_rate"] as? Double, offered, "every message sent in the window arrived")
        XCTAssertEqual(report["unresolved"] as? Int, 0, "every message was receipted")
        XCTAssertEqual(report["duplicates"] as? Int, 0)
        let latency = try XCTUnwrap(report["latency_us"] as? [String: Any])
        XCTAssertGreaterThan(try XCTUnwrap(latency["p50"] as? Double), 0, "the kernel's arrival time is after the send")
        XCTAssertGreaterThan(try XCTUnwrap(report["generator_cpu_us_per_message"] as? Double), 0)
        XCTAssertGreaterThan(try XCTUnwrap(report["relay_cpu_us_per_message"] as? Double), 0)
        XCTAssertGreaterThan(try XCTUnwrap(report["generator_wakeups_per_message"] as? Double), 0)
    }

    /// Each find-max step reports the relay's and the generator's CPU per message, in the JSON
    /// and on standard error.
    func testFindMaxStepsReportWhoUsedTheCPU() async throws {
        let simpload = try await build()
        let result = try await run(
            simpload,
            [
                "--port", String(relay.port), "--pairs", "2", "--rate", "300", "--seconds", "0.3", "--warmup", "0.1",
                "--find-max", "--relay-pid", String(getpid()),
            ])
        XCTAssertEqual(result.status, 0, result.errors)
        let report = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any])
        let steps = try XCTUnwrap(report["steps"] as? [[String: Any]])
        XCTAssertGreaterThan(steps.count, 1)
        for step in steps where (step["delivered_rate"] as? Double ?? 0) > 0 {
            XCTAssertGreaterThan(try XCTUnwrap(step["relay_cpu_us_per_message"] as? Double), 0, "\(step)")
            XCTAssertGreaterThan(try XCTUnwrap(step["generator_cpu_us_per_message"] as? Double), 0, "\(step)")
        }
        XCTAssertTrue(result.errors.contains("CPU µs/msg: relay"), result.errors)
    }

    /// Each pair's sender on one relay and its receiver on another (`--receiver-port`), the
    /// relays sharing a real Redis: every message and every receipt crosses between them through
    /// Redis pub/sub, and each message is delivered once and receipted.
    func testTwoRelaysDeliverEveryMessageOnceThroughRedisPubSub() async throws {
        let simpload = try await build()
        let cluster = try await TestRelayCluster.start(relays: 2) { _, configuration in configuration.requireLogin = false }
        let result: (status: Int32?, output: String, errors: String)
        let sending: RelayStatistics, receiving: RelayStatistics
        do {
            result = try await run(
                simpload,
                [
                    "--port", String(cluster.relays[0].port), "--receiver-port", String(cluster.relays[1].port), "--pairs", "3",
                    "--rate", "600", "--seconds", "1", "--warmup", "0.3", "--workers", "2",
                    "--redis-pid", String(getpid()), // the CPU of any process: the test's own
                ])
            (sending, receiving) = (try await cluster.relays[0].server.statistics(), try await cluster.relays[1].server.statistics())
        } catch {
            await cluster.stop()
            throw error
        }
        await cluster.stop()
        XCTAssertEqual(result.status, 0, result.errors)
        let report = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any])
        XCTAssertEqual((report["parameters"] as? [String: Any])?["relays"] as? Int, 2)
        let offered = try XCTUnwrap(report["offered_rate"] as? Double)
        assertOffered(offered, asked: 600)
        XCTAssertEqual(report["delivered_rate"] as? Double, offered, "every message sent in the window arrived")
        XCTAssertEqual(report["unresolved"] as? Int, 0, "every message was receipted")
        XCTAssertEqual(report["duplicates"] as? Int, 0)
        XCTAssertNotNil((report["redis"] as? [String: Any])?["cpu_seconds"] as? Double, "Redis's CPU is reported")
        XCTAssertGreaterThanOrEqual(sending.deliveriesPublished, Int(offered), "the senders' relay published every message to the other")
        XCTAssertGreaterThanOrEqual(receiving.datagramsForwarded, Int(offered), "the receivers' relay delivered them")
        XCTAssertGreaterThan(receiving.deliveriesPublished, 0, "receipts went back through Redis")
        XCTAssertEqual(sending.receiptsRouted + receiving.receiptsRouted > 0, true, "receipt frames reached the senders")
        XCTAssertTrue(sending.rejected.isEmpty && receiving.rejected.isEmpty, "nothing rejected: \(sending.rejected) \(receiving.rejected)")
    }

    /// On a relay with two event loops, `--placement same` keeps every receiver on its sender's
    /// loop (nothing handed across) and `--placement cross` puts every one on the other loop.
    func testPlacementPutsReceiversOnTheirSendersLoopOrOnTheOther() async throws {
        let simpload = try await build()
        let threaded = try await TestRelay.start {
            $0.requireLogin = false
            $0.threads = 2
        }
        do {
            for (placement, crossing) in [("same", 0), ("cross", 4)] {
                let before = try await handedOver(threaded)
                let result = try await run(
                    simpload,
                    [
                        "--port", String(threaded.port), "--pairs", "4", "--rate", "400", "--seconds", "0.5", "--warmup", "0.2",
                        "--relay-threads", "2", "--placement", placement, "--relay-pid", String(getpid()),
                    ])
                XCTAssertEqual(result.status, 0, result.errors)
                let report = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any])
                XCTAssertEqual(report["cross_loop_pairs"] as? Int, crossing, placement)
                XCTAssertEqual(report["delivered_rate"] as? Double, report["offered_rate"] as? Double, placement)
                XCTAssertEqual(report["unresolved"] as? Int, 0, placement)
                let threads = try XCTUnwrap((report["relay"] as? [String: Any])?["threads"] as? [[String: Any]])
                XCTAssertFalse(threads.isEmpty, "the relay's busy threads, each with its CPU")
                let handedAcross = try await handedOver(threaded) - before
                if crossing == 0 {
                    XCTAssertEqual(handedAcross, 0, "nothing crossed between the loops")
                } else {
                    XCTAssertGreaterThan(handedAcross, 0, "messages and receipts crossed between the loops")
                }
            }
            let wrong = try await run(simpload, ["--port", String(threaded.port), "--placement", "cross"])
            XCTAssertEqual(wrong.status, 2, "--placement without --relay-threads")
        } catch {
            await threaded.stop()
            throw error
        }
        await threaded.stop()
    }

    func testItExplainsItselfAndRefusesBadArguments() async throws {
        let simpload = try await build()
        let help = try await run(simpload, ["--help"])
        XCTAssertEqual(help.status, 0)
        XCTAssertTrue(help.output.contains("--find-max"))
        let noPort = try await run(simpload, ["--pairs", "3"])
        XCTAssertEqual(noPort.status, 2, "no --port")
        let noRate = try await run(simpload, ["--port", "1", "--rate", "0"])
        XCTAssertEqual(noRate.status, 2)
        // Nothing listens on port 1 of the loopback address.
        let refused = try await run(simpload, ["--port", "1", "--seconds", "1"])
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.errors.contains("cannot connect"), refused.errors)
    }

    /// `offered` (simpload's offered rate in its window) is the rate `asked`: at most 5 % under
    /// it, and at most 15 % over it, since a worker woken late at the window's start (a busy
    /// machine) sends then what fell due meanwhile, and those count in the window.
    private func assertOffered(_ offered: Double, asked: Double, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertGreaterThanOrEqual(offered, asked * 0.95, "offered", file: file, line: line)
        XCTAssertLessThanOrEqual(offered, asked * 1.15, "offered", file: file, line: line)
    }

    /// Deliveries the loops of `relay` handed to one another (published to a sibling).
    private func handedOver(_ relay: TestRelay) async throws -> Int {
        var total = 0
        for loop in relay.server.shards.relays { total += try await loop.statistics().deliveriesPublished }
        return total
    }

    /// Runs `executable` to its end (at most 60 s): exit status, standard output and error.
    private func run(_ executable: String, _ arguments: [String]) async throws -> (status: Int32?, output: String, errors: String) {
        let child = try ChildProcess(executable, arguments)
        let status = await child.exitStatus(timeout: 60)
        return (status, child.standardOutput, child.standardError)
    }

    private func build() async throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simpload-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        let output = directory.appendingPathComponent("simpload").path
        let compile = try await run(
            "/usr/bin/env",
            [
                "cc", "-O2", "-pthread", "-I", root.appendingPathComponent("Sources/CSIMPProto/include").path,
                "-o", output, root.appendingPathComponent("tools/simpload.c").path,
                root.appendingPathComponent("Sources/CSIMPProto/simp.pb-c.c").path,
                "-lprotobuf-c", "-lcrypto",
            ])
        XCTAssertEqual(compile.status, 0, compile.errors)
        return output
    }
}
