import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SIMPRedis

/// A private `redis-server` on 127.0.0.1, without persistence, for tools and tests that need a
/// Redis of their own (`simp-lab`'s real mode, `simp-bench`, the test suite). It can be stopped
/// and started again on the same port, like a Redis restart that loses every key.
public final class LocalRedisServer: Sendable {
    /// How clients reach it (with the password and TLS settings it was started with).
    public let url: RedisURL
    private let executable: URL
    private let extraArguments: [String]
    /// The running process, killed if it does not shut down when asked.
    private let running = NIOLockedValueBox<LaunchedProcess?>(nil)

    private init(url: RedisURL, executable: URL, extraArguments: [String]) {
        self.url = url
        self.executable = executable
        self.extraArguments = extraArguments
    }

    /// Starts `redis-server` on `port` (default: a free one) and waits until it answers PING.
    /// - Parameters:
    ///   - extraArguments: more `redis-server` options (later ones override earlier ones, so
    ///     `--port 0 --tls-port P` makes a TLS-only server).
    ///   - user, password, tls: how `url` logs in (e.g. with `--requirepass`, `--user`, TLS).
    public static func start(
        port: Int? = nil, extraArguments: [String] = [], user: String? = nil,
        password: String? = nil, tls: RedisTLS? = nil
    ) async throws -> LocalRedisServer {
        guard let executable = executable(named: "redis-server") else {
            throw RedisError("redis-server not found on PATH (apt-get install -y redis-server)")
        }
        let url = RedisURL(host: "127.0.0.1", port: try port ?? FreePort.tcp(), user: user, password: password, tls: tls)
        let server = LocalRedisServer(url: url, executable: executable, extraArguments: extraArguments)
        try await server.relaunch()
        return server
    }

    /// Starts the server (again, after `stop()`) on its port and waits until it answers PING.
    public func relaunch() async throws {
        let arguments =
            [
                "--port", String(url.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--daemonize", "no", "--loglevel", "warning",
            ] + extraArguments
        let process = try LaunchedProcess(executable, arguments)
        running.withLockedValue { $0 = process }
        guard try await answers(expected: true) else {
            kill()
            throw RedisError("redis-server on port \(url.port) did not start")
        }
    }

    /// Shuts the server down with `SHUTDOWN` and waits until its port is closed; a server that
    /// refuses (e.g. an ACL without `SHUTDOWN`) or lingers is killed. (Not SIGTERM: a process
    /// started from a test runner's thread may have it blocked.)
    public func stop() async {
        let client = RedisClient(url: url, timeout: .milliseconds(200), logger: Self.quiet)
        let reply = try? await client.command(["SHUTDOWN", "NOSAVE"])
        await client.shutdown()
        let refused = reply?.errorMessage != nil
        let closed = refused ? false : (try? await answers(expected: false)) == true
        if !closed {
            kill()
            _ = try? await answers(expected: false)
        }
        running.withLockedValue { $0 = nil }
    }

    private func kill() {
        running.withLockedValue { $0 }?.signal(SIGKILL)
    }

    /// `stop()` then `relaunch()`: the same port, every key gone.
    public func restart() async throws {
        await stop()
        try await relaunch()
    }

    /// Polls PING every 20 ms (up to 2 s) until the server does, or does not, answer.
    private func answers(expected: Bool) async throws -> Bool {
        for _ in 0..<100 {
            let client = RedisClient(url: url, timeout: .milliseconds(200), logger: Self.quiet)
            let up = (try? await client.command(["PING"])) == .status("PONG")
            await client.shutdown()
            if up == expected { return true }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        return false
    }

    /// Probes expect failures; they log nothing below errors.
    static var quiet: Logger {
        var logger = Logger(label: "simp.redis.probe")
        logger.logLevel = .error
        return logger
    }

    /// An executable on PATH (or in the usual system directories).
    public static func executable(named name: String) -> URL? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        return (path.split(separator: ":").map(String.init) + ["/usr/bin", "/usr/sbin", "/usr/local/bin"])
            .map { URL(fileURLWithPath: $0).appendingPathComponent(name) }
            .first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }
}
