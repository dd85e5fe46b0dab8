import NIOCore
import SIMPCore
import SIMPRedis
import SIMPRelay
import SIMPTestSupport
import XCTest

/// The stores run their Lua scripts by `EVALSHA`; a server that lost its script cache
/// (`SCRIPT FLUSH`, a restart, a failover) answers `NOSCRIPT` and the call is sent again with
/// the source, on the node that serves the call's keys.
final class ScriptCacheTests: XCTestCase {
    private func route(_ port: Int) throws -> Route {
        Route(address: try SocketAddress(ipAddress: "127.0.0.1", port: port), relayId: "script-test")
    }

    func testStoreCallsOnOneRedisWorkAfterSCRIPTFLUSH() async throws {
        let server = try await RedisServerProcess.start()
        let redis = RedisClient(url: server.url)
        addTeardownBlock {
            await redis.shutdown()
            await server.stop()
        }
        let registry = Registry(redis: redis, liveness: RelayLiveness(redis: redis, ttlSeconds: 30))
        _ = try await registry.liveness.renew(relayId: "script-test", description: "", on: redis.eventLoop).get()
        let rooms = RoomStore(redis: redis, postTTLSeconds: 60)
        let user = TestRelay.uniqueUser("flushed")
        let first = Registration(user: user, route: try route(4000), session: "s1", device: "phone")
        let second = Registration(user: user, route: try route(4001), session: "s2", device: "laptop")

        _ = try await redis.command(["SCRIPT", "FLUSH"])
        var before = redis.roundTrips
        let registered = try await registry.register(first, on: redis.eventLoop).get()
        XCTAssertEqual(registered.knownDevices, 1)
        XCTAssertEqual(redis.roundTrips - before, 2, "EVALSHA answered NOSCRIPT, then EVAL with the source")
        before = redis.roundTrips
        _ = try await registry.register(second, on: redis.eventLoop).get()
        XCTAssertEqual(redis.roundTrips - before, 1, "the script is cached again: EVALSHA alone")
        let routes = try await registry.lookup(user: user, on: redis.eventLoop).get()
        XCTAssertEqual(routes.receivers.compactMap { $0.address.port }.sorted(), [4000, 4001], "\(routes)")

        _ = try await redis.command(["SCRIPT", "FLUSH"])
        try await registry.withdraw(relayId: "script-test", registrations: [first, second], on: redis.eventLoop).get()
        let left = try await redis.command(["EXISTS", Registry.userKey(user)])
        XCTAssertEqual(left, .integer(0), "both sessions unregistered after NOSCRIPT")

        let room = "r\(UInt32.random(in: .min ... .max))"
        _ = try await rooms.answer(
            RoomRequest(operation: .join, room: room, user: user, connection: ConnectionID(1), messageId: 1),
            on: redis.eventLoop
        ).get()
        _ = try await redis.command(["SCRIPT", "FLUSH"])
        let members = try await rooms.members(of: room, askedBy: user, on: redis.eventLoop).get()
        XCTAssertEqual(members, [user])
        _ = try await redis.pipeline([
            ["DEL", RoomStore.membersKey(room)], ["DEL", PresenceStore.roomsKey(user)],
            ["DEL", Registry.devicesKey(user)], ["DEL", Registry.seenKey(user)],
        ])
    }

    func testPipelinedStoreCallsForKeysOnEveryMasterWorkAfterSCRIPTFLUSHOnEveryNode() async throws {
        let cluster = try await RedisClusterProcess.shared()
        let client = RedisClusterClient(seeds: cluster.seeds)
        addTeardownBlock { await client.shutdown() }
        // Users spread until every master serves some.
        var users: [String] = []
        var owners = Set<RedisURL>()
        for index in 0..<200 where owners.count < 3 || users.count < 6 {
            let user = TestRelay.uniqueUser("shard\(index)")
            owners.insert(try await client.masterURL(forKey: PresenceStore.presenceKey(user)).get())
            users.append(user)
        }
        XCTAssertEqual(owners.count, 3)
        let presence = PresenceStore(redis: client)
        let registry = Registry(redis: client, liveness: RelayLiveness(redis: client, ttlSeconds: 30))
        _ = try await registry.liveness.renew(relayId: "script-test", description: "", on: client.eventLoop).get()
        let registrations = try users.enumerated().map { index, user in
            Registration(user: user, route: try route(5000 + index), session: "s\(index)", device: "d")
        }

        _ = try await client.onEveryMaster(["SCRIPT", "FLUSH"]).get()
        for user in users {
            _ = try await presence.record(user: user, online: true, now: WallClock.millisecondsSinceEpoch(), on: client.eventLoop).get()
        }
        let entries = try await presence.lookup(users, on: client.eventLoop).get()
        XCTAssertEqual(entries.map(\.online), Array(repeating: true, count: users.count), "\(entries)")

        _ = try await client.onEveryMaster(["SCRIPT", "FLUSH"]).get()
        try await registry.refresh(registrations, on: client.eventLoop).get()
        for registration in registrations {
            let routes = try await registry.lookup(user: registration.user, on: client.eventLoop).get()
            XCTAssertEqual(routes.receivers, [registration.route], registration.user)
        }

        _ = try await client.onEveryMaster(["SCRIPT", "FLUSH"]).get()
        try await registry.withdraw(relayId: "script-test", registrations: registrations, on: client.eventLoop).get()
        let left = try await client.pipeline(users.map { ["EXISTS", Registry.userKey($0)] })
        XCTAssertEqual(left, Array(repeating: .integer(0), count: users.count))
        _ = try await client.pipeline(users.flatMap { [["DEL", PresenceStore.presenceKey($0)], ["DEL", Registry.devicesKey($0)]] })
        _ = try await client.command(["DEL", Registry.relayKey("script-test")])
    }
}
