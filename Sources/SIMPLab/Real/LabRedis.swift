import Foundation
import NIOCore
import NIOPosix
import SIMPRedis

/// A private `redis-server` for a real-mode run, on a free loopback port, without persistence;
/// it can be stopped and started again on the same port (the `restartRedis` fault).
final class LabRedis: @unchecked Sendable {
    let url: RedisURL
    private let executable: URL

    private init(url: RedisURL, executable: URL) {
        self.url = url
        self.executable = executable
    }

    static func start() async throws -> LabRedis {
        guard let executable = findOnPath("redis-server") else {
            throw LabError("redis-server not found on PATH (apt-get install redis-server)")
        }
        let redis = LabRedis(url: RedisURL(host: "127.0.0.1", port: try await freeTCPPort()), executable: executable)
        try await redis.launch()
        return redis
    }

    /// Starts the server (again) and waits until it answers PING.
    func launch() async throws {
        let process = Process()
        process.executableURL = executable
        process.arguments = ["--port", String(url.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--daemonize", "no", "--loglevel", "warning"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        guard try await answers(within: 100, expected: true) else {
            process.terminate()
            throw LabError("redis-server on port \(url.port) did not start")
        }
    }

    /// Shuts the server down and waits until its port is closed.
    func stop() async {
        let client = RedisClient(url: url, timeout: .milliseconds(200))
        _ = try? await client.command(["SHUTDOWN", "NOSAVE"])
        await client.shutdown()
        _ = try? await answers(within: 100, expected: false)
    }

    /// Polls PING every 20 ms until the server does (or does not) answer.
    private func answers(within tries: Int, expected: Bool) async throws -> Bool {
        let client = RedisClient(url: url, timeout: .milliseconds(200))
        defer { Task { await client.shutdown() } }
        for _ in 0..<tries {
            let up = (try? await client.command(["PING"])) == .status("PONG")
            if up == expected { return true }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        return false
    }

    private static func findOnPath(_ name: String) -> URL? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        return (path.split(separator: ":").map(String.init) + ["/usr/bin", "/usr/sbin", "/usr/local/bin"])
            .map { URL(fileURLWithPath: $0).appendingPathComponent(name) }
            .first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
func freeTCPPort() async throws -> Int {
    let group = MultiThreadedEventLoopGroup.singleton
    let channel = try await ServerBootstrap(group: group).bind(host: "127.0.0.1", port: 0).get()
    let port = channel.localAddress!.port!
    try await channel.close()
    return port
}
