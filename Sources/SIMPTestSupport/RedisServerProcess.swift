import Foundation
import SIMPLocalServers
import SIMPRedis

/// The Redis a test uses: the one `SIMP_TEST_REDIS_URL` names (as `.ci/run` sets; shared and
/// left running), or a `LocalRedisServer` of the test's own, stopped by `stop()`.
public final class RedisServerProcess: Sendable {
    /// Where the Redis listens.
    public let url: RedisURL
    private let local: LocalRedisServer?

    private init(url: RedisURL, local: LocalRedisServer?) {
        self.url = url
        self.local = local
    }

    /// The server named by `SIMP_TEST_REDIS_URL`, or a new private one.
    public static func start() async throws -> RedisServerProcess {
        if let text = ProcessInfo.processInfo.environment["SIMP_TEST_REDIS_URL"], !text.isEmpty {
            return RedisServerProcess(url: try RedisURL(parsing: text), local: nil)
        }
        return try await startPrivate()
    }

    /// A new private `redis-server` on a free port.
    public static func startPrivate() async throws -> RedisServerProcess {
        let local = try await LocalRedisServer.start()
        return RedisServerProcess(url: local.url, local: local)
    }

    /// A new private `redis-server` started with `extraArguments` (e.g. `--requirepass`, TLS
    /// options), whose `url` logs in with `user`/`password` and `tls`.
    public static func startPrivate(
        extraArguments: [String], port: Int? = nil, user: String? = nil, password: String? = nil,
        tls: RedisTLS? = nil
    ) async throws -> RedisServerProcess {
        let local = try await LocalRedisServer.start(port: port, extraArguments: extraArguments, user: user, password: password, tls: tls)
        return RedisServerProcess(url: local.url, local: local)
    }

    /// Restarts a private server on its port, empty (a Redis restart without persistence).
    public func restart() async throws {
        guard let local else { preconditionFailure("only a private redis-server can be restarted") }
        try await local.restart()
    }

    /// Starts a private server stopped by `stop()` again on its port, empty (Redis back after
    /// an outage, without persistence).
    public func relaunch() async throws {
        guard let local else { preconditionFailure("only a private redis-server can be relaunched") }
        try await local.relaunch()
    }

    /// Stops a server this object started; a shared one is left running.
    public func stop() async {
        await local?.stop()
    }
}
