import Foundation
import SIMPLocalServers
import SIMPRedis
import SIMPTestSupport
import XCTest

/// The AOF settings OPERATIONS.md recommends keep data across a Redis restart.
final class RedisPersistenceTests: XCTestCase {
    func testDataWrittenBeforeShutdownIsThereAfterARestart() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-aof-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: directory) }
        let server = try await LocalRedisServer.start(
            extraArguments: ["--dir", directory.path, "--appendonly", "yes", "--appendfsync", "everysec", "--aof-use-rdb-preamble", "yes"])
        addTeardownBlock { await server.stop() }
        let client = RedisClient(url: server.url)
        addTeardownBlock { await client.shutdown() }
        let users = (0..<100).map { "simp:cred:user\($0)" }
        _ = try await client.pipeline(users.map { ["HSET", $0, "salt", "s-\($0)"] })

        await server.stop() // SHUTDOWN: Redis writes and fsyncs the append-only file first.
        try await server.relaunch()
        let back = try await client.pipeline(users.map { ["HGET", $0, "salt"] })
        XCTAssertEqual(back, users.map { .string("s-\($0)") })
    }
}
