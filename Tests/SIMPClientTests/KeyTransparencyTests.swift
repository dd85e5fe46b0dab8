import Foundation
import NIOConcurrencyHelpers
import NIOCore
import SIMPCore
import SIMPRelay
import SIMPTestSupport
import XCTest

@testable import SIMPClient

/// Key transparency with a real relay and Redis (docs/E2E.md §18): the relay's store is wrapped
/// so that it shows bob a forked key directory log (every leaf but bob's own lists altered, as a
/// relay that substitutes others' device lists for bob must); alice and bob each detect it within
/// one message exchange, from the checkpoint the other sent end to end.
final class KeyTransparencyTests: EndToEndRelayTestCase {
    /// The user shown a forked log (set by the test before anyone connects).
    private let forkedUser = NIOLockedValueBox("")

    override func makeRelayStore(_ configuration: RelayConfiguration) -> (any RelayStore)? {
        ForkingStore(wrapping: RedisRelayStore(endpoint: configuration.redisEndpoint, logger: configuration.logger), forkFor: forkedUser)
    }

    private func connect(_ user: String, device: String) async throws -> SIMPClient {
        try await connectEndToEnd(user, device: device) { $0.endToEnd?.makesUserKey = true }
    }

    func testARelayShowingTwoUsersDifferentDirectoriesIsCaughtByBothInOneExchange() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        forkedUser.withLockedValue { $0 = bob }
        let bobClient = try await connect(bob, device: "phone")
        let bobInbox = MessageInbox(bobClient)
        let bobNotices = EndToEndNoticeLog(bobClient)
        let aliceClient = try await connect(alice, device: "desk")
        let aliceInbox = MessageInbox(aliceClient)
        let aliceNotices = EndToEndNoticeLog(aliceClient)

        _ = try await aliceClient.send(text: "hello bob", to: bob)
        let arrived = await bobInbox.waitFor(1)
        XCTAssertTrue(arrived)
        let bobCaught = await bobNotices.waitFor { $0 == .keyDirectoryForked(user: alice) }
        let bobSaid = await bobNotices.notices
        XCTAssertTrue(bobCaught, "bob: \(bobSaid)")

        _ = try await bobClient.send(text: "hello alice", to: alice)
        let answered = await aliceInbox.waitFor(1)
        XCTAssertTrue(answered)
        let aliceCaught = await aliceNotices.waitFor { $0 == .keyDirectoryForked(user: bob) }
        let aliceSaid = await aliceNotices.notices
        XCTAssertTrue(aliceCaught, "alice: \(aliceSaid)")
        XCTAssertEqual(EndToEndNotice.keyDirectoryForked(user: alice).eventName, "keyDirectoryForked")
        XCTAssertTrue(
            EndToEndNotice.keyDirectoryForked(user: alice).errorLine?.contains("the relay is showing different key directories to you and \(alice)")
                == true)
        await aliceClient.close()
        await bobClient.close()
    }

    /// The honest path: the same relay (no fork), restarted between messages, and a second relay
    /// on the same Redis: no alarm, and each side verified a head.
    func testAnHonestRelayRestartedAndASecondOneOnTheSameRedisRaiseNoAlarm() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let second = try await TestRelay.start(redis: relay.redis)
        let home = self.home!
        let bobClient = try await second.connectClient(user: bob) {
            $0.device = "phone"
            $0.endToEnd = EndToEndSettings(home: home)
            $0.endToEnd?.makesUserKey = true
        }
        let bobInbox = MessageInbox(bobClient)
        let bobNotices = EndToEndNoticeLog(bobClient)
        let aliceClient = try await connect(alice, device: "desk")
        let aliceInbox = MessageInbox(aliceClient)
        let aliceNotices = EndToEndNoticeLog(aliceClient)

        for round in 1...2 {
            _ = try await aliceClient.send(text: "to bob \(round)", to: bob)
            let arrived = await bobInbox.waitFor(round)
            XCTAssertTrue(arrived)
            _ = try await bobClient.send(text: "to alice \(round)", to: alice)
            let answered = await aliceInbox.waitFor(round)
            XCTAssertTrue(answered)
            if round == 1 { try await relay.restart() }
        }
        try await Task.sleep(nanoseconds: 500_000_000) // room for a gossip check's fetch, if any went wrong
        let said = await aliceNotices.notices + bobNotices.notices
        XCTAssertFalse(said.contains(where: Self.isDirectoryAlarm), "\(said)")
        let heads = try await [aliceClient, bobClient].asyncMap { client in
            try await client.onEngine(now: { $0.endToEnd?.keyDirectory.latest?.size ?? 0 })
        }
        XCTAssertTrue(heads.allSatisfy { $0 >= 2 }, "both verified a head of both lists: \(heads)")
        await bobClient.close()
        await second.stopKeepingRedis()
    }

    /// alice and bob talk, carol and dave arrive, then all four join one room at once, greet one
    /// another, admit one another and post: alice and bob fetch the newcomers' device lists with
    /// several answers in flight from the size they knew before the log grew. No answer that
    /// crossed another is taken for a fork or refused (docs/E2E.md §18.4).
    func testMembersJoiningOneRoomAtOnceRaiseNoAlarm() async throws {
        let users = ["alice", "bob", "carol", "dave"].map { TestRelay.uniqueUser($0) }
        let room = TestRelay.uniqueUser("ops")
        var clients: [SIMPClient] = []
        for user in users.prefix(2) { clients.append(try await connect(user, device: "desk")) }
        let bobInbox = MessageInbox(clients[1])
        _ = try await clients[0].send(text: "hello bob", to: users[1]) // alice and bob verify a head of 2 entries
        let arrived = await bobInbox.waitFor(1)
        XCTAssertTrue(arrived)
        for user in users.dropFirst(2) { clients.append(try await connect(user, device: "desk")) } // the log grows to 4
        let logs = clients.map { EndToEndNoticeLog($0) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for client in clients { group.addTask { _ = try await client.joinRoom(room) } }
            try await group.waitForAll()
        }
        await withTaskGroup(of: Void.self) { group in
            for (index, client) in clients.enumerated() {
                group.addTask {
                    await withTaskGroup(of: Void.self) { greetings in // each greets the others at once
                        for other in users where other != users[index] {
                            greetings.addTask { _ = try? await client.send(text: "hi \(other)", to: other) }
                        }
                    }
                    await withTaskGroup(of: Void.self) { admits in
                        for other in users where other != users[index] { admits.addTask { try? await client.admit(other, toRoom: room) } }
                    }
                    _ = try? await client.send(text: "hello from \(users[index])", toRoom: room)
                }
            }
        }
        try await Task.sleep(nanoseconds: 500_000_000) // room for a re-asked fetch or a gossip check
        var said: [EndToEndNotice] = []
        for log in logs { said += await log.notices }
        XCTAssertFalse(said.contains(where: Self.isDirectoryAlarm), "\(said)")
        let heads = try await clients.asyncMap { client in try await client.onEngine(now: { $0.endToEnd?.keyDirectory.latest?.size ?? 0 }) }
        XCTAssertTrue(heads.allSatisfy { $0 >= UInt64(users.count) }, "each verified a head holding every list: \(heads)")
        for client in clients { await client.close() }
    }
}

extension KeyTransparencyTests {
    /// Whether `notice` says the relay's key directory was refused or forked.
    fileprivate static func isDirectoryAlarm(_ notice: EndToEndNotice) -> Bool {
        switch notice {
        case .keyDirectoryForked, .keyDirectoryRefused: true
        default: false
        }
    }
}

extension Array {
    fileprivate func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}

/// Redis's store, except that key fetches by one user get a forked log: every leaf that is not
/// one of that user's own published device lists is altered, so the user's own list still
/// proves, and the log grows as the real one does, but its roots differ from everyone else's.
private final class ForkingStore: WrappingRelayStore, @unchecked Sendable {
    let inner: RedisRelayStore
    private let forkFor: NIOLockedValueBox<String>
    private let ownLeaves = NIOLockedValueBox<Set<[UInt8]>>([])

    init(wrapping inner: RedisRelayStore, forkFor: NIOLockedValueBox<String>) {
        self.inner = inner
        self.forkFor = forkFor
    }

    func perform(_ request: StoreRequest, on eventLoop: EventLoop) -> EventLoopFuture<StoreAnswer> {
        let victim = forkFor.withLockedValue { $0 }
        if case .publishKeys(let keys) = request, keys.user == victim, !keys.deviceList.isEmpty {
            ownLeaves.withLockedValue { _ = $0.insert(KeyLogSnapshot.leafHash(of: keys.deviceList)) }
        }
        return inner.perform(request, on: eventLoop).map { [ownLeaves] answer in
            guard case .fetchKeys(let fetch, let devices, let known, let list, var log?) = answer, fetch.asker == victim else { return answer }
            let own = ownLeaves.withLockedValue { $0 }
            log.leafHashes = log.leafHashes.map { own.contains($0) ? $0 : KeyLogSnapshot.leafHash(of: $0) }
            return .fetchKeys(fetch, devices, known: known, deviceList: list, log: log)
        }
    }

}
