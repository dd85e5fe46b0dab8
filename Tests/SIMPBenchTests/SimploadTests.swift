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
        XCTAssertEqual(try XCTUnwrap(report["offered_rate"] as? Double), 600, accuracy: 30)
        XCTAssertEqual(report["delivered_rate"] as? Double, report["offered_rate"] as? Double, "every message sent in the window arrived")
        XCTAssertEqual(try XCTUnwrap(report["receipt_rate"] as? Double), 600, accuracy: 60)
        XCTAssertEqual(report["unresolved"] as? Int, 0, "every message was receipted")
        XCTAssertEqual(report["duplicates"] as? Int, 0)
        let stats = try await relay.server.statistics()
        XCTAssertGreaterThan(stats.receiptsRouted, 0, "receipt frames went through the relay")
        XCTAssertLessThan(stats.receiptsRouted * 3, stats.datagramsForwarded, "batches: a frame covers several messages")
        XCTAssertTrue(stats.rejected.isEmpty, "nothing rejected: \(stats.rejected)")
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
