import Logging
import NIOCore
import NIOPosix
import SIMPClient
import SIMPRedis
import SIMPRelay

/// N relays on one real Redis Cluster (`RedisClusterProcess`), as an operator runs them with
/// `--redis redis+cluster://…`, plus helpers to place users on chosen masters and connect them.
public final class ClusterRelays: Sendable {
    /// The Redis Cluster the relays share.
    public let cluster: RedisClusterProcess
    /// The relays, in the order they were started.
    public let relays: [BackgroundRelay]
    /// A cluster client for the test's own checks (and for creating users).
    public let inspector: RedisClusterClient
    private let clients = ConnectedClients()

    private init(cluster: RedisClusterProcess, relays: [BackgroundRelay], inspector: RedisClusterClient) {
        self.cluster = cluster
        self.relays = relays
        self.inspector = inspector
    }

    /// Starts `count` relays (ids unique per run) on `cluster`; `configure` gets each relay's index.
    public static func start(
        on cluster: RedisClusterProcess, relays count: Int = 3,
        configure: (Int, inout RelayConfiguration) -> Void = { _, _ in }
    ) async throws -> ClusterRelays {
        let run = String(UInt32.random(in: .min ... .max), radix: 16)
        let inspector = RedisClusterClient(seeds: cluster.seeds, logger: Logger(label: "test.inspector"))
        var relays: [BackgroundRelay] = []
        do {
            for index in 0..<count {
                var configuration = RelayConfiguration()
                configuration.port = 0
                configuration.udpPort = 0
                configuration.redisEndpoint = .cluster(seeds: cluster.seeds)
                configuration.relayId = "crelay\(index)-\(run)"
                configuration.logger = Logger(label: "test.relay\(index)")
                configure(index, &configuration)
                relays.append(try await BackgroundRelay.start(configuration: configuration))
            }
        } catch {
            for relay in relays { await relay.shutdown() }
            await inspector.shutdown()
            throw error
        }
        return ClusterRelays(cluster: cluster, relays: relays, inspector: inspector)
    }

    /// Relay `index`'s id.
    public func relayId(_ index: Int) -> String { relays[index].configuration.relayId }

    /// The master (its port) that serves `key`'s slot now.
    public func masterPort(ofKey key: String) async throws -> Int {
        try await inspector.masterURL(forKey: key).get().port
    }

    /// `count` unique user ids starting with `name`, each of whose keys lives on a different master
    /// (as far as there are masters): users spread over the shards.
    public func usersOnDistinctMasters(_ name: String, count: Int) async throws -> [String] {
        var users: [String] = [], masters = Set<Int>()
        let available = try await inspector.masters().get().count
        while users.count < count {
            let user = TestRelay.uniqueUser(name + String(users.count))
            let master = try await masterPort(ofKey: Registry.userKey(user))
            if masters.count >= available || !masters.contains(master) {
                users.append(user)
                masters.insert(master)
            }
        }
        return users
    }

    /// Creates `user` (its test password) in the cluster.
    public func addUser(_ user: String) async throws {
        try await TestRelay.addUser(user, in: inspector)
    }

    /// Connects a client to relay `index` that fails over to the others in turn; closed by `stop()`.
    public func connectClient(user: String, relay index: Int, configure: (inout ClientConfiguration) -> Void = { _ in }) async throws -> SIMPClient {
        try await addUser(user)
        var configuration = TestRelay.clientConfiguration(user: user, port: relays[index].controlAddress!.port!)
        configuration.fallbackServers = relays.indices.filter { $0 != index }.map {
            RelayEndpoint(host: "127.0.0.1", port: relays[$0].controlAddress!.port!)
        }
        configure(&configuration)
        return try await clients.connect(configuration)
    }

    /// Closes clients and relays (the cluster keeps running).
    public func stop() async {
        await clients.closeAll()
        for relay in relays { await relay.shutdown() }
        await inspector.shutdown()
    }
}
