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
            left = try await keys.publish(publish, on: redis.eventLoop).get().left
        }
        XCTAssertEqual(left, RelayCore.maxOneTimePrekeysPerDevice, "300 offered, the cap kept")
    }
}
