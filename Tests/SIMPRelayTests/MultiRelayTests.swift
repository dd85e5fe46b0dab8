import NIOCore
import SIMPClient
import SIMPCore
import SIMPRelay
import SIMPTestSupport
import XCTest

/// Three relays on one real Redis, clients on loopback: routing between relays through Redis
/// pub/sub, moves, and failover when a relay dies.
final class MultiRelayTests: XCTestCase {
    private var cluster: TestRelayCluster!

    override func tearDown() async throws {
        await cluster?.stop()
    }

    private func start(configure: (Int, inout RelayConfiguration) -> Void = { _, _ in }) async throws {
        cluster = try await TestRelayCluster.start(relays: 3, configure: configure)
    }

    func testUsersOnThreeRelaysChatOneToOneWithReceiptsCrossingRelays() async throws {
        try await start()
        let users = ["ann", "ben", "cat"].map(TestRelay.uniqueUser)
        var clients: [SIMPClient] = [], inboxes: [MessageInbox] = []
        for (index, user) in users.enumerated() {
            // No retransmission (loopback loses nothing): a slow machine's late receipt would
            // count its message twice below.
            let client = try await cluster.connectClient(user: user, relay: index) {
                ($0.retransmit.initialRTO, $0.retransmit.minimumRTO, $0.retransmit.maximumRTO) = (.seconds(20), .seconds(20), .seconds(20))
            }
            clients.append(client)
            inboxes.append(MessageInbox(client))
        }
        for (from, client) in clients.enumerated() {
            for to in users.indices where to != from {
                let result = try await client.send(text: "\(users[from]) to \(users[to])", to: users[to])
                guard case .delivered = result else { return XCTFail("\(users[from]) -> \(users[to]): \(result)") }
            }
        }
        for (index, inbox) in inboxes.enumerated() {
            let arrived = await inbox.waitFor(2)
            XCTAssertTrue(arrived)
            let texts = Set(await inbox.messages.map(\.content))
            XCTAssertEqual(texts, Set(users.indices.filter { $0 != index }.map { "\(users[$0]) to \(users[index])" }))
        }
        for relay in cluster.relays {
            let stats = try await relay.server.statistics()
            // Each relay handed over 2 datagrams (its user's sends) and 2 receipts (for messages from the others).
            XCTAssertEqual(stats.deliveriesPublished, 4, "\(relay.server.configuration.relayId)")
            XCTAssertEqual(stats.datagramsForwarded, 2, "delivered from the receiver's relay")
            XCTAssertEqual(stats.receiptsRouted, 2, "receipts reach the sender through its own relay")
        }
    }

    func testKilledRelaysUsersFailOverAndNothingIsLostOrDuplicated() async throws {
        try await start()
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let aliceClient = try await cluster.connectClient(user: alice, relay: 0)
        let bobClient = try await cluster.connectClient(user: bob, relay: 1)
        let aliceInbox = MessageInbox(aliceClient), bobInbox = MessageInbox(bobClient)

        let count = 30
        async let fromAlice = Self.sendSpaced(count, from: aliceClient, to: bob)
        async let fromBob = Self.sendSpaced(count, from: bobClient, to: alice)
        let midConversation = await Eventually.holds {
            let (toBob, toAlice) = (await bobInbox.messages.count, await aliceInbox.messages.count)
            return toBob >= 5 && toAlice >= 5
        }
        XCTAssertTrue(midConversation)
        await cluster.relays[0].server.crash()
        let (aliceResults, bobResults) = try await (fromAlice, fromBob)

        for result in aliceResults + bobResults {
            guard case .delivered = result else { return XCTFail("\(result)") }
        }
        let aliceRelay = await aliceClient.relayId
        XCTAssertNotEqual(aliceRelay, cluster.relays[0].server.configuration.relayId, "alice moved to a live relay")
        let bobGotAll = await bobInbox.waitFor(count), aliceGotAll = await aliceInbox.waitFor(count)
        XCTAssertTrue(bobGotAll && aliceGotAll)
        _ = await Eventually.stays { // quiet period: room for a stray duplicate to show up
            let (toBob, toAlice) = (await bobInbox.messages.count, await aliceInbox.messages.count)
            return toBob == count && toAlice == count
        }
        let toBob = await bobInbox.messages.map(\.content), toAlice = await aliceInbox.messages.map(\.content)
        XCTAssertEqual(toBob.sorted(), (0..<count).map { "m\($0)" }.sorted(), "each exactly once")
        XCTAssertEqual(toAlice.sorted(), (0..<count).map { "m\($0)" }.sorted(), "each exactly once")
    }

    /// Sends `count` messages 10 ms apart, each waited for concurrently.
    private static func sendSpaced(_ count: Int, from client: SIMPClient, to user: String) async throws -> [SendResult] {
        try await withThrowingTaskGroup(of: SendResult.self) { group in
            for index in 0..<count {
                group.addTask { try await client.send(text: "m\(index)", to: user) }
                try await Task.sleep(nanoseconds: 10_000_000) // paced, as a conversation
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }

    func testClientStartsOnTheNextRelayWhenTheFirstIsDown() async throws {
        try await start()
        await cluster.relays[0].server.crash()
        let dave = TestRelay.uniqueUser("dave"), erin = TestRelay.uniqueUser("erin")
        let daveClient = try await cluster.connectClient(user: dave, relay: 0) // tries relay 0, then 1
        let erinClient = try await cluster.connectClient(user: erin, relay: 2)
        let daveRelay = await daveClient.relayId
        XCTAssertEqual(daveRelay, cluster.relays[1].server.configuration.relayId)
        let result = try await erinClient.send(text: "found you", to: dave)
        guard case .delivered = result else { return XCTFail("\(result)") }
    }

    func testDeadRelaysKeyExpiresAndItsUsersAreLookedUpAsOffline() async throws {
        try await start { _, configuration in configuration.registrationTTLSeconds = 2 }
        let carol = TestRelay.uniqueUser("carol")
        _ = try await cluster.connectClient(user: carol, relay: 0) { $0.reconnect = nil }
        let bus = RelayBus(redis: cluster.inspector)
        let ids = cluster.relays.map(\.server.configuration.relayId)
        let all = try await bus.liveRelays()
        XCTAssertEqual(Set(all.keys).intersection(ids), Set(ids), "every relay announces itself")

        await cluster.relays[0].server.crash()
        let expired = try await Eventually.holds { try await bus.liveRelays()[ids[0]] == nil }
        XCTAssertTrue(expired, "the dead relay's key outlives its TTL")
        let live = try await bus.liveRelays()
        XCTAssertEqual(Set(live.keys).intersection(ids), Set(ids.dropFirst()))
        let registry = Registry(redis: cluster.inspector, liveness: RelayLiveness(redis: cluster.inspector, ttlSeconds: 2))
        let routes = try await registry.lookup(user: carol, on: cluster.inspector.eventLoop).get()
        XCTAssertEqual(routes.receivers, [], "no relay vouches for carol's session")
        XCTAssertEqual(routes.relays, [])
        XCTAssertTrue(routes.known, "offline, not unknown")
    }

    func testUserWhoMovesIsReachedAtTheNewRelayThroughTheMoveAnnouncement() async throws {
        // Routes are cached for a minute: only the move announcement can end a stale one in time.
        try await start { _, configuration in configuration.routeCacheTTL = .seconds(60) }
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let aliceClient = try await cluster.connectClient(user: alice, relay: 0)
        let oldBob = try await cluster.connectClient(user: bob, relay: 1) { $0.reconnect = nil }
        guard case .delivered = try await aliceClient.send(text: "before", to: bob) else { return XCTFail("first send") }

        // bob connects on relay 2 while his session on relay 1 is still open: relay 1 closes it.
        let newBob = try await cluster.connectClient(user: bob, relay: 2) { $0.reconnect = nil }
        let inbox = MessageInbox(newBob)
        let oldClosed = await Eventually.holds { (try? await self.cluster.relays[1].server.statistics().connectedUsers) == 0 }
        XCTAssertTrue(oldClosed, "relay 1 still holds bob's superseded session")

        let result = try await aliceClient.send(text: "after the move", to: bob)
        guard case .delivered = result else { return XCTFail("\(result)") }
        let arrived = await inbox.waitFor(1)
        XCTAssertTrue(arrived)
        let texts = await inbox.messages.map(\.content)
        XCTAssertEqual(texts, ["after the move"])
        _ = oldBob
    }

    func testARoomSpreadOverThreeRelaysGetsEveryPostInOneOrderAndTheAuthorSeesProgress() async throws {
        try await start()
        let room = "room-\(UInt32.random(in: .min ... .max))"
        var members: [SIMPClient] = [], inboxes: [MessageInbox] = []
        for (index, name) in ["ann", "ben", "cat"].enumerated() {
            let client = try await cluster.connectClient(user: TestRelay.uniqueUser(name), relay: index)
            _ = try await client.joinRoom(room)
            members.append(client)
            inboxes.append(MessageInbox(client))
        }
        let progress = NoticeLog(members[0])

        for (author, text) in [(0, "one"), (1, "two"), (2, "three"), (0, "four")] {
            guard case .stored = try await members[author].send(text: text, toRoom: room) else { return XCTFail(text) }
        }

        let expected = [["two", "three"], ["one", "three", "four"], ["one", "two", "four"]]
        for (index, inbox) in inboxes.enumerated() {
            let arrived = await inbox.waitFor(expected[index].count)
            XCTAssertTrue(arrived, "member \(index) got the posts of members on other relays at once")
            let texts = await inbox.messages.map(\.content)
            XCTAssertEqual(texts, expected[index], "one room order, each post once")
        }
        let complete = await progress.waitFor {
            if case .roomProgress(_, _, 2, 2) = $0 { return true }; return false
        }
        XCTAssertTrue(complete, "the author on relay 0 hears 2/2 from members on relays 1 and 2")
    }

    func testAMessageStoredOnOneRelayIsDeliveredWhenTheUserConnectsToAnother() async throws {
        try await start()
        let ann = TestRelay.uniqueUser("ann"), ben = TestRelay.uniqueUser("ben")
        let benFirst = try await cluster.connectClient(user: ben, relay: 1)
        await benFirst.close() // ben is known, and offline
        _ = try await Eventually.holds { try await self.cluster.inspector.command(["EXISTS", "simp:user:{\(ben)}"]).integer == 0 }
        let annClient = try await cluster.connectClient(user: ann, relay: 0)
        let notices = NoticeLog(annClient)

        guard case .stored = try await annClient.send(text: "while you were away", to: ben) else { return XCTFail("not stored") }
        let benAgain = try await cluster.connectClient(user: ben, relay: 2)
        let inbox = MessageInbox(benAgain)

        let arrived = await inbox.waitFor(1)
        XCTAssertTrue(arrived)
        let texts = await inbox.messages.map(\.content)
        XCTAssertEqual(texts, ["while you were away"])
        let delivered = await notices.waitFor {
            if case .delivered = $0 { return true }; return false
        }
        XCTAssertTrue(delivered, "ann, on relay 0, hears that ben got it on relay 2")
    }
}
