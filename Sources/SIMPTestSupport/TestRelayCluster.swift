import NIOCore
import SIMPClient
import SIMPRedis
import SIMPRelay

/// N relays on free loopback ports sharing one real Redis, as an operator would run them.
public final class TestRelayCluster: Sendable {
    /// The Redis every relay uses.
    public let redis: RedisServerProcess
    /// The relays, in the order they were started.
    public let relays: [TestRelay]
    /// A Redis connection for the test's own checks.
    public var inspector: RedisClient { relays[0].inspector }

    private init(redis: RedisServerProcess, relays: [TestRelay]) {
        self.redis = redis
        self.relays = relays
    }

    /// Starts `count` relays (ids unique per run) on one Redis (a private one, or
    /// `SIMP_TEST_REDIS_URL`); `configure` gets each relay's index.
    public static func start(relays count: Int = 3, configure: (Int, inout RelayConfiguration) -> Void = { _, _ in }) async throws -> TestRelayCluster
    {
        let redis = try await RedisServerProcess.start()
        let run = String(UInt32.random(in: .min ... .max), radix: 16)
        var relays: [TestRelay] = []
        do {
            for index in 0..<count {
                relays.append(
                    try await TestRelay.start(redis: redis) { configuration in
                        configuration.relayId = "relay\(index)-\(run)"
                        configure(index, &configuration)
                    })
            }
        } catch {
            for relay in relays { await relay.stopKeepingRedis() }
            await redis.stop()
            throw error
        }
        return TestRelayCluster(redis: redis, relays: relays)
    }

    /// Control addresses of all relays, starting with relay `first` and wrapping around.
    public func endpoints(startingAt first: Int = 0) -> [RelayEndpoint] {
        (0..<relays.count).map { RelayEndpoint(host: "127.0.0.1", port: relays[(first + $0) % relays.count].port) }
    }

    /// Connects a client to relay `index` that fails over to the others in turn; closed by `stop()`.
    public func connectClient(user: String, relay index: Int, configure: (inout ClientConfiguration) -> Void = { _ in }) async throws -> SIMPClient {
        let fallbacks = Array(endpoints(startingAt: index).dropFirst())
        return try await relays[index].connectClient(user: user) { configuration in
            configuration.fallbackServers = fallbacks
            configure(&configuration)
        }
    }

    /// Stops every relay and clients, then a private Redis.
    public func stop() async {
        for relay in relays { await relay.stopKeepingRedis() }
        await redis.stop()
    }
}
