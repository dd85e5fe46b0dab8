import NIOCore
import SIMPClient
import SIMPCore
import SIMPRelay
import SIMPTestSupport
import XCTest

/// Group chat against a real Redis and a real relay.
final class RoomTests: RelayTestCase {
    private func uniqueRoom() -> String { "room-\(UInt32.random(in: .min ... .max))" }

    func testRoomOfFiveWithTwoOfflineReachesEveryoneInOneOrderAndTheAuthorSeesFiveOfFive() async throws {
        let room = uniqueRoom()
        let alice = try await relay.connectClient(user: TestRelay.uniqueUser("alice"))
        let progress = NoticeLog(alice)
        _ = try await alice.joinRoom(room)
        var online: [(SIMPClient, MessageInbox)] = []
        var offline: [String] = []
        for index in 1...5 {
            let user = TestRelay.uniqueUser("member\(index)")
            let client = try await relay.connectClient(user: user)
            let members = try await client.joinRoom(room)
            XCTAssertEqual(members.count, index + 1)
            if index <= 3 {
                online.append((client, MessageInbox(client)))
            } else {
                await client.close()
                offline.append(user)
            }
        }

        // alice posts, then a member posts, then alice again: one room order for all.
        var posts: [(author: SIMPClient, text: String)] = [(alice, "one"), (online[0].0, "two"), (alice, "three")]
        var ids: [String: UInt64] = [:]
        for (author, text) in posts {
            let result = try await author.send(text: text, toRoom: room)
            guard case .stored(let id, _) = result else { return XCTFail("\(text): \(result)") }
            ids[text] = id
        }
        posts.removeAll()

        for (index, (_, inbox)) in online.enumerated() {
            let expected = index == 0 ? 2 : 3 // a member does not get its own post back
            let arrived = await inbox.waitFor(expected)
            XCTAssertTrue(arrived, "online member \(index + 1) got its copies at once")
        }
        var orders: [[String]] = []
        for (_, inbox) in online { orders.append(await inbox.messages.map(\.content)) }
        for user in offline {
            let client = try await relay.connectClient(user: user)
            let inbox = MessageInbox(client)
            let arrived = await inbox.waitFor(3)
            XCTAssertTrue(arrived, "\(user) got the room's posts on reconnect")
            let messages = await inbox.messages
            XCTAssertEqual(Set(messages.map(\.fromUser)), ["#\(room)"])
            XCTAssertEqual(messages.map(\.author), [alice.configuration.user, online[0].0.configuration.user, alice.configuration.user])
            orders.append(messages.map(\.content))
        }
        XCTAssertEqual(orders[0], ["one", "three"])
        for order in orders.dropFirst() { XCTAssertEqual(order, ["one", "two", "three"], "one order for every member") }

        for text in ["one", "three"] {
            let id = ids[text]!
            let all = await progress.waitFor { $0 == .roomProgress(messageId: id, room: room, delivered: 5, of: 5) }
            XCTAssertTrue(all, "alice sees 5/5 for \"\(text)\"")
        }
        _ = await Eventually.stays { // quiet period: a second copy would show
            for (_, inbox) in online.dropFirst() { if await inbox.messages.count != 3 { return false } }
            return true
        }
        for (_, inbox) in online.dropFirst() {
            let count = await inbox.messages.count
            XCTAssertEqual(count, 3, "exactly once")
        }
        let aliceProgress = await progress.notices
        XCTAssertFalse(
            aliceProgress.contains {
                if case .roomProgress(_, _, let k, _) = $0 { return k > 5 }; return false
            })
    }

    func testNonMembersCannotPostOrListAndLeavingRemovesAMember() async throws {
        let room = uniqueRoom()
        let alice = try await relay.connectClient(user: TestRelay.uniqueUser("alice"))
        let bob = try await relay.connectClient(user: TestRelay.uniqueUser("bob"))
        let eve = try await relay.connectClient(user: TestRelay.uniqueUser("eve"))
        _ = try await alice.joinRoom(room)
        let members = try await bob.joinRoom(room)
        XCTAssertEqual(members, [alice.configuration.user, bob.configuration.user].sorted())

        let posted = try await eve.send(text: "let me in", toRoom: room)
        guard case .failed(_, .rejected(.notAMember, _)) = posted else { return XCTFail("\(posted)") }
        do {
            _ = try await eve.roomMembers(room)
            XCTFail("a non-member listed the room")
        } catch SIMPClientError.rejected(let code, _) {
            XCTAssertEqual(code, .notAMember)
        }
        do {
            _ = try await eve.joinRoom("no spaces allowed")
            XCTFail("an invalid room name was accepted")
        } catch SIMPClientError.rejected(let code, _) {
            XCTAssertEqual(code, .badRequest)
        }

        try await bob.leaveRoom(room)
        let left = try await alice.roomMembers(room)
        XCTAssertEqual(left, [alice.configuration.user])
        let stats = try await relay.server.statistics()
        XCTAssertEqual(stats.rejected[.notAMember], 2)
    }
}
