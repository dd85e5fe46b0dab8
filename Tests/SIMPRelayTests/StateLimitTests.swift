import NIOCore
import NIOEmbedded
import SIMPCore
import SIMPRedis
import SIMPRelay
import SIMPTestSupport
import XCTest

/// What one user may make the relays keep is bounded, in Redis as in memory: rooms per user,
/// members per room, one-time prekeys per device.
final class StateLimitTests: XCTestCase {
    private func join(_ rooms: RoomStore, _ room: String, as user: String, on eventLoop: EventLoop) async throws -> RoomAnswer {
        try await rooms.answer(RoomRequest(operation: .join, room: room, user: user, connection: ConnectionID(1), messageId: 1), on: eventLoop).get()
    }

    func testAUserInTheMostRoomsCannotJoinOrCreateAnotherButMayRejoin() async throws {
        let server = try await RedisServerProcess.start()
        let redis = RedisClient(url: server.url)
        addTeardownBlock {
            await redis.shutdown()
            await server.stop()
        }
        let rooms = RoomStore(redis: redis, postTTLSeconds: 60)
        let user = TestRelay.uniqueUser("joiner"), prefix = "r\(UInt32.random(in: .min ... .max))-"
        for index in 0..<RelayCore.maxRoomsPerUser {
            guard case .members = try await join(rooms, "\(prefix)\(index)", as: user, on: redis.eventLoop) else {
                return XCTFail("join \(index) refused")
            }
        }
        let refused = try await join(rooms, "\(prefix)one-more", as: user, on: redis.eventLoop)
        XCTAssertEqual(refused, .limitReached("you are a member of \(RelayCore.maxRoomsPerUser) rooms, the relay's limit: leave one first"))
        let created = try await redis.command(["EXISTS", RoomStore.membersKey("\(prefix)one-more")]).integer
        XCTAssertEqual(created, 0, "the room was not created")
        guard case .members = try await join(rooms, "\(prefix)0", as: user, on: redis.eventLoop) else { return XCTFail("a room it is in") }
    }

    /// Joins at once through two clients of one Redis (two relays) cannot take a room past its
    /// members or a user past its rooms: each cap is checked and taken in one script. (With the
    /// counts read in one round trip and the join written in the next, all 40 got in.)
    func testJoinsAtOnceThroughTwoRelaysStayWithinTheCaps() async throws {
        let server = try await RedisServerProcess.start()
        let clients = [RedisClient(url: server.url), RedisClient(url: server.url)]
        addTeardownBlock {
            for client in clients { await client.shutdown() }
            await server.stop()
        }
        let stores = clients.map { RoomStore(redis: $0, postTTLSeconds: 60) }
        func joinsAtOnce(_ pairs: [(room: String, user: String)]) async throws -> [RoomAnswer] {
            let futures = pairs.enumerated().map { index, pair in
                stores[index % 2].answer(
                    RoomRequest(operation: .join, room: pair.room, user: pair.user, connection: ConnectionID(1), messageId: 1),
                    on: clients[index % 2].eventLoop)
            }
            var answers: [RoomAnswer] = []
            for future in futures { answers.append(try await future.get()) }
            return answers
        }
        func admitted(_ answers: [RoomAnswer]) -> Int { answers.filter { if case .members = $0 { true } else { false } }.count }

        let room = "crowd-\(UInt32.random(in: .min ... .max))"
        _ = try await clients[0].command(["SADD", RoomStore.membersKey(room)] + (0..<(RelayCore.maxRoomMembers - 5)).map { "early\($0)" })
        let late = (0..<40).map { (room: room, user: "late\($0)-\(room)") }
        let lateAnswers = try await joinsAtOnce(late)
        XCTAssertEqual(admitted(lateAnswers), 5, "\(lateAnswers)")
        let members = try await clients[0].command(["SCARD", RoomStore.membersKey(room)]).integer
        XCTAssertEqual(members, Int64(RelayCore.maxRoomMembers))
        for pair in late {
            let inRoom = try await clients[0].command(["SISMEMBER", RoomStore.membersKey(room), pair.user]).integer
            let listed = try await clients[0].command(["SISMEMBER", PresenceStore.roomsKey(pair.user), room]).integer
            XCTAssertEqual(listed, inRoom, "a refused join gives back its place among the user's rooms")
        }

        let user = TestRelay.uniqueUser("joiner")
        _ = try await clients[1].command(["SADD", PresenceStore.roomsKey(user)] + (0..<(RelayCore.maxRoomsPerUser - 5)).map { "held\($0)" })
        let rooms = (0..<30).map { (room: "new\($0)-\(room)", user: user) }
        let roomAnswers = try await joinsAtOnce(rooms)
        XCTAssertEqual(admitted(roomAnswers), 5, "\(roomAnswers)")
        let held = try await clients[1].command(["SCARD", PresenceStore.roomsKey(user)]).integer
        XCTAssertEqual(held, Int64(RelayCore.maxRoomsPerUser))
        var created = 0
        for pair in rooms where try await clients[1].command(["EXISTS", RoomStore.membersKey(pair.room)]).integer == 1 { created += 1 }
        XCTAssertEqual(created, 5, "only the admitted joins created rooms")
    }

    func testTheInMemoryStoreRefusesTheSameJoins() throws {
        let store = InMemoryRelayStore()
        let loop = EmbeddedEventLoop()
        func join(_ user: String) throws -> StoreAnswer {
            try store.perform(.room(RoomRequest(operation: .join, room: "full", user: user, connection: ConnectionID(1), messageId: 1)), on: loop)
                .wait()
        }
        for index in 0..<RelayCore.maxRoomMembers { _ = try join("u\(index)") }
        let refused = try join("late")
        guard case .room(_, .limitReached(let why)) = refused else { return XCTFail("\(refused)") }
        XCTAssertEqual(why, "#full has \(RelayCore.maxRoomMembers) members, the relay's limit")
    }

    func testADevicesOneTimePrekeysAreCapped() async throws {
        let server = try await RedisServerProcess.start()
        let redis = RedisClient(url: server.url)
        addTeardownBlock {
            await redis.shutdown()
            await server.stop()
        }
        let keys = KeyBundleStore(redis: redis)
        let user = TestRelay.uniqueUser("prekeys")
        var left = 0
        for round in 0..<3 {
            let prekeys = (0..<100).map { index -> [UInt8] in [UInt8(round), UInt8(index)] + Array(repeating: 1, count: 34) }
            let publish = KeysPublish(user: user, device: "d", bundle: [1, 2, 3], oneTimePrekeys: prekeys, connection: ConnectionID(1), messageId: 1)
            left = try await keys.publish(publish, on: redis.eventLoop).get()?.left ?? -1
        }
        XCTAssertEqual(left, RelayCore.maxOneTimePrekeysPerDevice, "300 offered, the cap kept")
    }
}
