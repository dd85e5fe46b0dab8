import Logging
import NIOConcurrencyHelpers
import NIOCore
import SIMPClient
import SIMPCore
import SIMPRedis
import SIMPRelay

/// A relay on free loopback ports next to a real Redis, plus helpers to connect clients.
public final class TestRelay: @unchecked Sendable { // `server` is replaced only by `restart`, which the test awaits
    /// The Redis the relay uses.
    public let redis: RedisServerProcess
    /// The relay (replaced by `restart`).
    public private(set) var server: BackgroundRelay
    /// A Redis connection for the test's own checks.
    public let inspector: RedisClient
    private let clients = ConnectedClients()

    private init(redis: RedisServerProcess, server: BackgroundRelay) {
        self.redis = redis
        self.server = server
        self.inspector = RedisClient(url: redis.url)
    }

    /// Starts a relay on ephemeral ports next to `redis` (by default: a new private Redis, or
    /// the one `SIMP_TEST_REDIS_URL` names).
    /// `makeStore` gives the relay a store of the test's own (such as one that wraps Redis's);
    /// nil: Redis's.
    public static func start(
        redis: RedisServerProcess? = nil, configure: (inout RelayConfiguration) -> Void = { _ in },
        makeStore: ((RelayConfiguration) -> (any RelayStore)?)? = nil
    ) async throws -> TestRelay {
        let redis = try await {
            if let redis { return redis }; return try await RedisServerProcess.start()
        }()
        var configuration = RelayConfiguration()
        configuration.port = 0
        configuration.udpPort = 0
        configuration.redis = redis.url
        configuration.logger = Logger(label: "test.relay")
        configure(&configuration)
        do {
            return TestRelay(redis: redis, server: try await BackgroundRelay.start(configuration: configuration, store: makeStore?(configuration)))
        } catch {
            await redis.stop()
            throw error
        }
    }

    /// The relay's control port.
    public var port: Int { server.controlAddress!.port! }

    /// Stops the relay (gracefully: its registrations are withdrawn) and, after `downtime`,
    /// starts a new one with the same settings on the same ports.
    public func restart(downtime: TimeAmount = .zero) async throws {
        var configuration = server.configuration
        configuration.port = server.controlAddress!.port!
        configuration.additionalPorts = server.addresses.additionalControl.map { $0.port! }
        configuration.udpPort = server.datagramAddress!.port!
        await server.shutdown()
        try await Task.sleep(nanoseconds: UInt64(downtime.nanoseconds))
        server = try await BackgroundRelay.start(configuration: configuration)
    }

    /// A unique user id for this test run, so tests sharing a Redis never collide.
    public static func uniqueUser(_ name: String) -> String {
        "\(name)-\(UInt32.random(in: .min ... .max))"
    }

    /// The password `addUser` gives `user` unless told otherwise.
    public static func password(for user: String) -> String { "secret of \(user)" }
    /// PBKDF2 iterations of test users: the protocol's minimum, to keep tests quick.
    public static let testIterations = PasswordVerifier.minimumIterations

    /// Creates (or resets) `user` with `password` in this relay's Redis.
    public func addUser(_ user: String, password: String? = nil) async throws {
        try await Self.addUser(user, password: password, in: inspector)
    }

    /// Creates (or resets) `user` with `password` (default: its test password) in `redis`.
    public static func addUser(_ user: String, password: String? = nil, in redis: any RedisCommands) async throws {
        let verifier = PasswordVerifier.make(password: password ?? Self.password(for: user), iterations: Self.testIterations)
        try await CredentialStore(redis: redis).add(user, verifier: verifier, replace: true)
    }

    /// A client configuration for `user` (created with its test password) pointing at this
    /// relay, with quick retransmits for tests.
    public func clientConfiguration(user: String) async throws -> ClientConfiguration {
        try await addUser(user)
        return Self.clientConfiguration(user: user, port: port)
    }

    /// A client configuration for `user` with its test password, pointing at the relay on
    /// loopback `port`, with quick retransmits for tests.
    public static func clientConfiguration(user: String, port: Int) -> ClientConfiguration {
        var configuration = ClientConfiguration(serverHost: "127.0.0.1", serverPort: port, user: user, password: Self.password(for: user))
        configuration.localHost = "127.0.0.1"
        configuration.retransmit.initialRTO = .milliseconds(200)
        configuration.retransmit.minimumRTO = .milliseconds(50)
        configuration.retransmit.maxAttempts = 6
        configuration.reconnect?.initialDelay = .milliseconds(100)
        configuration.reconnect?.maxDelay = .milliseconds(500)
        return configuration
    }

    /// Connects a client (creating its user), closed by `stop()`.
    public func connectClient(user: String, configure: (inout ClientConfiguration) -> Void = { _ in }) async throws -> SIMPClient {
        var configuration = try await clientConfiguration(user: user)
        configure(&configuration)
        return try await clients.connect(configuration)
    }

    /// Closes clients, the relay, and a private Redis.
    public func stop() async {
        await stopKeepingRedis()
        await redis.stop()
    }

    /// Closes clients and the relay, leaving Redis running (for relays that share it).
    public func stopKeepingRedis() async {
        await clients.closeAll()
        await server.shutdown()
        await inspector.shutdown()
    }
}

/// The clients a test helper connected, closed together.
final class ConnectedClients: Sendable {
    private let clients = NIOLockedValueBox<[SIMPClient]>([])

    /// Connects a client with `configuration` and keeps it for `closeAll()`.
    func connect(_ configuration: ClientConfiguration) async throws -> SIMPClient {
        let client = SIMPClient(configuration: configuration)
        clients.withLockedValue { $0.append(client) }
        try await client.connect()
        return client
    }

    func closeAll() async {
        for client in clients.withLockedValue({ $0 }) { await client.close() }
    }
}

/// Polling helpers for conditions that become true asynchronously.
public enum Eventually {
    /// How long the waits of the test helpers give a condition by default: long, because a test
    /// that waits for a condition costs only the time the condition takes, and a loaded machine
    /// (parallel builds, a load average of 10) can take seconds for what takes milliseconds
    /// alone. Speed is measured by benchmarks, not by these bounds.
    public static let generousBound: TimeAmount = .seconds(30)

    /// Re-evaluates `condition` every 20 ms until it holds or `timeout` passes; returns whether it held.
    public static func holds(
        within timeout: TimeAmount = generousBound, isolation: isolated (any Actor)? = #isolation, _ condition: () async throws -> Bool
    ) async rethrows -> Bool {
        let deadline = NIODeadline.now() + timeout
        while NIODeadline.now() < deadline {
            if try await condition() { return true }
            try? await Task.sleep(nanoseconds: 20_000_000)
        }
        return try await condition()
    }

    /// How long a test watches for something that must not happen (a duplicate, a stray copy, a
    /// reconnect) after everything it waited for arrived: a quiet period, the one kind of fixed
    /// wait a test keeps, because an absence has no event to wait for.
    public static let quietPeriod: TimeAmount = .milliseconds(500)

    /// Re-evaluates `condition` every 20 ms for `period` (a quiet period) and returns false as
    /// soon as it fails: for what must stay true, such as "exactly one copy arrived".
    public static func stays(
        for period: TimeAmount = quietPeriod, isolation: isolated (any Actor)? = #isolation, _ condition: () async throws -> Bool
    ) async rethrows -> Bool {
        let end = NIODeadline.now() + period
        while NIODeadline.now() < end {
            if try await !condition() { return false }
            try? await Task.sleep(nanoseconds: 20_000_000)
        }
        return try await condition()
    }
}

/// Collects everything a client receives, for tests to inspect at any time.
public actor MessageInbox {
    /// Every message received so far, in order of arrival.
    public private(set) var messages: [SIMPMessage] = []

    /// Starts consuming `client.messages` (a stream has one consumer: use one inbox per client).
    public init(_ client: SIMPClient) {
        Task { [weak self] in
            for await message in client.messages { await self?.append(message) }
        }
    }

    private func append(_ message: SIMPMessage) { messages.append(message) }

    /// Waits until at least `count` messages arrived; returns whether they did within `timeout`.
    public func waitFor(_ count: Int, within timeout: TimeAmount = Eventually.generousBound) async -> Bool {
        await Eventually.holds(within: timeout) { self.messages.count >= count }
    }
}
