import Foundation
import NIOCore
import SIMPClient
import SIMPCore
import SIMPE2E
import SIMPRedis
import SIMPTestSupport
import XCTest

/// Room posts end to end through real relays and a real Redis (docs/E2E.md §14).
extension EndToEndRelayTests {
    /// A room of three on two relays: each member reads the others' posts, while no post is
    /// readable in Redis nor on the relay-Redis link (a post from a client without end-to-end
    /// encryption is, so the search can fail). After carol leaves, alice's next post (stored
    /// for bob, who is offline) has a new sender key: carol's saved keys cannot decrypt it,
    /// bob's can.
    func testRoomPostsAreReadByTheMembersOnlyAndNotByOneWhoLeft() async throws {
        let monitor = try await startTwoRelaysAndMonitor()
        defer { monitor.signal(SIGTERM) }

        let (alice, bob, carol) = (TestRelay.uniqueUser("alice"), TestRelay.uniqueUser("bob"), TestRelay.uniqueUser("carol"))
        let room = TestRelay.uniqueUser("ops") // Redis may be shared by the tests of a run
        let posts = [alice: "vault code 4417", bob: "the eagle lands at midnight", carol: "launch code 9931"]
        let clients = [alice: try await connect(alice, relay: 0), bob: try await connect(bob, relay: 1), carol: try await connect(carol, relay: 0)]
        var inboxes: [String: MessageInbox] = [:]
        for (user, client) in clients {
            inboxes[user] = MessageInbox(client)
            _ = try await client.joinRoom(room)
        }
        for user in [alice, bob, carol] {
            let result = try await clients[user]!.send(text: posts[user]!, toRoom: room)
            guard case .stored = result else { return XCTFail("\(user)'s post: \(result)") }
        }
        for user in [alice, bob, carol] {
            let arrived = await inboxes[user]!.waitFor(2)
            XCTAssertTrue(arrived, "\(user) did not get both other posts")
            let read = await inboxes[user]!.messages
            XCTAssertEqual(Set(read.map(\.content)), Set(posts.filter { $0.key != user }.values), user)
            XCTAssertEqual(Set(read.map(\.author)), Set(posts.keys.filter { $0 != user }), user)
            XCTAssertTrue(read.allSatisfy(\.isEndToEnd), user)
        }

        let plain = "an unencrypted room line"
        let dave = TestRelay.uniqueUser("dave")
        let daveClient = try await connect(dave, relay: 1, endToEnd: false)
        _ = try await daveClient.joinRoom(room)
        guard case .stored = try await daveClient.send(text: plain, toRoom: room) else { return XCTFail("dave's post not stored") }
        try await daveClient.leaveRoom(room)

        // carol leaves; bob goes offline; alice's next post waits in bob's log.
        try await clients[carol]!.leaveRoom(room)
        await clients[carol]!.close()
        await clients[bob]!.close()
        let gone = try await Eventually.holds { try await self.cluster.inspector.command(["EXISTS", "simp:user:{\(bob)}"]).integer == 0 }
        XCTAssertTrue(gone)
        let secret = "carol must not read this"
        guard case .stored(let postId, _) = try await clients[alice]!.send(text: secret, toRoom: room) else { return XCTFail("not stored") }

        let redisText = try await everyKeyAndValue()
        for text in Array(posts.values) + [secret] { XCTAssertFalse(Self.reveals(redisText, text), "\"\(text)\" is readable in Redis") }
        let stored = try await storedRoomCopy(for: bob, author: alice, authorMessageId: postId)
        XCTAssertTrue(stored.isEndToEnd)
        var random = SystemRandomNumberGenerator()
        var carolKeys = try E2EMessenger(device: "", store: EndToEndFileStore(home: home, user: carol, device: ""), using: &random)
        XCTAssertThrowsError(try carolKeys.openRoomPost(stored.e2ePayload, room: room, author: alice, now: 0), "carol read a post after she left") {
            guard case E2EError.noSession = $0 else { return XCTFail("\($0)") }
        }

        let bobAgain = try await connect(bob, relay: 1)
        let laterInbox = MessageInbox(bobAgain)
        let delivered = await Eventually.holds { await laterInbox.messages.contains { $0.content == secret } }
        XCTAssertTrue(delivered, "bob did not read the post made while he was offline")

        let traffic = monitor.standardOutput
        XCTAssertTrue(Self.reveals(traffic, plain), "the search finds an unencrypted post on the relay-Redis link")
        for text in Array(posts.values) + [secret] {
            XCTAssertFalse(Self.reveals(traffic, text), "\"\(text)\" crossed the relay-Redis link readable")
        }
    }

    /// A member without keys (a client without end-to-end encryption) cannot read a post: the
    /// post goes, encrypted for the others, and its author is told who cannot read it (never to
    /// post unencrypted); with unencrypted posts allowed (`--no-e2e`) it goes readable (and is
    /// marked on arrival).
    func testAPostToARoomWithAMemberWithoutKeysGoesToTheOthersAndSaysWhoCannotReadIt() async throws {
        cluster = try await TestRelayCluster.start(relays: 1)
        let (alice, dave) = (TestRelay.uniqueUser("alice"), TestRelay.uniqueUser("dave"))
        let room = TestRelay.uniqueUser("ops")
        let aliceClient = try await connect(alice, relay: 0)
        let daveClient = try await connect(dave, relay: 0, endToEnd: false)
        let daveInbox = MessageInbox(daveClient)
        _ = try await aliceClient.joinRoom(room)
        _ = try await daveClient.joinRoom(room)
        let told = Told()
        Task {
            for await notice in aliceClient.endToEndNotices {
                if case .noUsableKeys(dave, room) = notice { await told.set() }
                XCTAssertFalse(notice.description.contains("--no-e2e"), notice.description)
            }
        }
        guard case .stored = try await aliceClient.send(text: "for members with keys", toRoom: room) else { return XCTFail("not posted") }
        let said = await Eventually.holds { await told.value }
        XCTAssertTrue(said, "alice is told dave cannot read the room")
        let allowing = try await cluster.connectClient(user: alice, relay: 0) { configuration in
            configuration.device = "second"
            configuration.endToEnd = EndToEndSettings(home: self.home, allowUnencrypted: true)
        }
        guard case .stored = try await allowing.send(text: "readable by all", toRoom: room) else { return XCTFail("not posted") }
        let arrived = await Eventually.holds { await daveInbox.messages.contains { $0.content == "readable by all" } }
        XCTAssertTrue(arrived)
        let received = await daveInbox.messages
        XCTAssertFalse(received.contains { $0.content == "for members with keys" }, "dave cannot read it")
        XCTAssertEqual(received.last?.isEndToEnd, false)
    }

    /// Whether a notice came.
    private actor Told {
        private(set) var value = false
        func set() { value = true }
    }

    /// `user`'s stored copy (in `simp:log:{user}`) of the room post `authorMessageId` by `author`.
    private func storedRoomCopy(for user: String, author: String, authorMessageId: UInt64) async throws -> SIMPMessage {
        let entries = try await cluster.inspector.command(["XRANGE", "simp:log:{\(user)}", "-", "+"]).array ?? []
        for entry in entries {
            let fields = entry.array?.last?.array?.compactMap(\.string) ?? []
            guard let index = fields.firstIndex(of: "e"), index + 1 < fields.count else { continue }
            let parts = fields[index + 1].split(separator: " ")
            guard parts.count >= 2, let data = Data(base64Encoded: String(parts[1])),
                let message = try? MessageCodec.decode(ByteBuffer(bytes: Array(data)))
            else { continue }
            if message.author == author, message.authorMessageId == authorMessageId { return message }
        }
        throw MissingCopy(description: "no stored copy of \(author)'s post \(authorMessageId) in \(user)'s log")
    }
}

private struct MissingCopy: Error, CustomStringConvertible {
    let description: String
}
