import NIOCore
import SIMPClient
import SIMPCore
import SIMPRedis
import SIMPRelay
import SIMPTestSupport
import XCTest

/// Relays on a real Redis Cluster (3 masters + 3 replicas on loopback), users spread over the
/// shards: one-to-one, rooms, offline storage and deliveries across relays on the run's shared
/// cluster; a master killed mid-stream and a reshard mid-stream on clusters of their own.
final class ClusterRelayTests: XCTestCase {
    private var relays: ClusterRelays?

    override func tearDown() async throws {
        await relays?.stop()
    }

    func testUsersOnEveryShardChatAcrossRelaysInRoomsAndOffline() async throws {
        let relays = try await ClusterRelays.start(on: try await RedisClusterProcess.shared(), relays: 3)
        self.relays = relays
        let users = try await relays.usersOnDistinctMasters("shard", count: 4)
        let masters = try await Set(users.prefix(3).asyncMap { try await relays.masterPort(ofKey: Registry.userKey($0)) })
        XCTAssertEqual(masters.count, 3, "the first three users live on three masters")
        var clients: [SIMPClient] = [], inboxes: [MessageInbox] = []
        for index in 0..<3 {
            clients.append(try await relays.connectClient(user: users[index], relay: index))
            inboxes.append(MessageInbox(clients[index]))
        }
        // The fourth registers once (it becomes known), then goes offline.
        let absent = try await relays.connectClient(user: users[3], relay: 2) { $0.reconnect = nil }
        await absent.close()
        let gone = try await Eventually.holds { try await relays.inspector.command(["EXISTS", Registry.userKey(users[3])]).integer == 0 }
        XCTAssertTrue(gone)

        for from in 0..<3 {
            for to in 0..<3 where to != from {
                let result = try await clients[from].send(text: "\(from) to \(to)", to: users[to])
                guard case .delivered = result else { return XCTFail("\(from) -> \(to): \(result)") }
            }
            let stored = try await clients[from].send(text: "\(from) to the absent", to: users[3])
            guard case .stored = stored else { return XCTFail("\(from) -> offline: \(stored)") }
        }
        for (index, inbox) in inboxes.enumerated() {
            let arrived = await inbox.waitFor(2)
            XCTAssertTrue(arrived)
            let texts = Set(await inbox.messages.map(\.content))
            XCTAssertEqual(texts, Set((0..<3).filter { $0 != index }.map { "\($0) to \(index)" }))
        }

        let room = "cluster-\(UInt32.random(in: .min ... .max))"
        for client in clients { _ = try await client.joinRoom(room) }
        let posted = try await clients[0].send(text: "to the room", toRoom: room)
        guard case .stored = posted else { return XCTFail("room post: \(posted)") }
        for inbox in inboxes.dropFirst() {
            let heard = await Eventually.holds { await inbox.messages.contains { $0.fromUser == "#\(room)" && $0.content == "to the room" } }
            XCTAssertTrue(heard, "room members on other relays and shards get the post")
        }

        let late = try await relays.connectClient(user: users[3], relay: 1)
        let lateInbox = MessageInbox(late)
        let caughtUp = await lateInbox.waitFor(3)
        XCTAssertTrue(caughtUp)
        let lateTexts = Set(await lateInbox.messages.map(\.content))
        XCTAssertEqual(lateTexts, Set((0..<3).map { "\($0) to the absent" }))

        // The operator's views scan every master.
        let sessions = try await SessionDirectory(redis: relays.inspector).list()
        for (user, relay) in zip(users, [0, 1, 2, 1]) {
            XCTAssertEqual(sessions.first { $0.user == user }?.relayId, relays.relayId(relay), user)
        }
        let known = try await CredentialStore(redis: relays.inspector).users()
        XCTAssertTrue(Set(users).isSubset(of: known))
        let live = try await RelayBus(redis: relays.inspector).liveRelays()
        XCTAssertTrue(Set((0..<3).map(relays.relayId)).isSubset(of: Set(live.keys)))
        for relay in relays.relays {
            let published = try await relay.statistics().deliveriesPublished
            XCTAssertGreaterThan(published, 0, "deliveries crossed relays by SPUBLISH")
        }
    }

    func testARelayGivenAClusterNodeAsOneServerSaysToNameTheCluster() async throws {
        let cluster = try await RedisClusterProcess.shared()
        var configuration = RelayConfiguration()
        configuration.port = 0
        configuration.udpPort = 0
        configuration.redis = cluster.seeds[0]
        do {
            let relay = try await BackgroundRelay.start(configuration: configuration)
            await relay.shutdown()
            XCTFail("a relay started on one node of a cluster")
        } catch {
            XCTAssertTrue("\(error)".contains("is a node of a Redis Cluster: name the cluster as redis+cluster://"), "\(error)")
        }
    }

    func testMasterKilledMidStreamIsFollowedWithNothingLostDuplicatedOrReordered() async throws {
        let cluster = try await RedisClusterProcess.start(nodeTimeoutMilliseconds: 1000)
        addTeardownBlock { await cluster.stop() }
        let relays = try await ClusterRelays.start(on: cluster, relays: 2)
        addTeardownBlock { await relays.stop() } // before the cluster's (blocks run last first)
        // The victim serves relay 1's delivery channel and bob's keys; alice lives elsewhere.
        let victim = try await relays.masterPort(ofKey: RelayBus.deliveryChannel(relays.relayId(1)))
        let bob = try await relays.user("bob", onMaster: victim, equal: true)
        let alice = try await relays.user("alice", onMaster: victim, equal: false)
        let outcome = try await StreamCheck.run(relays, alice: alice, bob: bob) {
            cluster.kill(port: victim)
        }
        outcome.assertExactlyOnceInOrder()
        try await cluster.waitUntilHealthy(timeout: 60)
        let masters = try await cluster.masterPorts()
        XCTAssertFalse(masters.contains(victim))
        XCTAssertEqual(masters.count, 3, "the victim's replica was promoted")
    }

    func testReshardMidStreamIsFollowedWithoutErrors() async throws {
        let cluster = try await RedisClusterProcess.start()
        addTeardownBlock { await cluster.stop() }
        let masters = try await cluster.masterPorts()
        let (source, target) = (masters[0], masters[1])
        // redis-cli moves the source's lowest slots: put bob's keys and relay 1's channel there.
        let moving = try await Self.lowestSlots(of: source, count: 400, in: cluster)
        let relayId = Self.name("mover") { moving.contains(RedisKeySlot.slot(of: RelayBus.deliveryChannel($0))) }
        let relays = try await ClusterRelays.start(on: cluster, relays: 2) { index, configuration in
            if index == 1 { configuration.relayId = relayId }
        }
        addTeardownBlock { await relays.stop() } // before the cluster's (blocks run last first)
        let bob = Self.name("bob") { moving.contains(RedisKeySlot.slot(of: Registry.userKey($0))) }
        let alice = try await relays.user("alice", onMaster: source, equal: false)
        let outcome = try await StreamCheck.run(relays, alice: alice, bob: bob) {
            try await cluster.reshard(slots: 400, from: source, to: target)
        }
        outcome.assertExactlyOnceInOrder()
        try await relays.inspector.refreshSlots().get()
        let bobsMaster = try await relays.masterPort(ofKey: Registry.userKey(bob))
        XCTAssertEqual(bobsMaster, target, "bob's slot moved")
        for relay in relays.relays {
            let rejected = try await relay.statistics().rejected
            XCTAssertNil(rejected[.registryUnavailable], "no store request failed: \(rejected)")
            XCTAssertNil(rejected[.inboxUnavailable], "\(rejected)")
        }
    }

    /// The `count` lowest slots served by the master on `port`.
    private static func lowestSlots(of port: Int, count: Int, in cluster: RedisClusterProcess) async throws -> Set<Int> {
        var slots: [Int] = []
        for range in try await cluster.command(port, ["CLUSTER", "SLOTS"]).array ?? [] {
            guard let parts = range.array, parts.count >= 3, let start = parts[0].integer, let end = parts[1].integer,
                parts[2].array?[1].integer == Int64(port)
            else { continue }
            slots += (Int(start)...Int(end))
        }
        return Set(slots.sorted().prefix(count))
    }

    /// A unique name starting with `prefix` that satisfies `accepted`.
    private static func name(_ prefix: String, _ accepted: (String) -> Bool) -> String {
        while true {
            let name = TestRelay.uniqueUser(prefix)
            if accepted(name) { return name }
        }
    }
}

extension ClusterRelays {
    /// A unique user id starting with `name` whose keys live (`equal`) or do not live on the master on `port`.
    func user(_ name: String, onMaster port: Int, equal: Bool) async throws -> String {
        while true {
            let user = TestRelay.uniqueUser(name)
            if try await (masterPort(ofKey: Registry.userKey(user)) == port) == equal { return user }
        }
    }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
