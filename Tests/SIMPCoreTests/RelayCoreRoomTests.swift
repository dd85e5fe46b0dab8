import NIOCore
import SIMPCore
import SIMPCoreTestKit
import XCTest

/// Rooms in the relay core: posts numbered by the store and copied to every other member's
/// inbox, member lists, delivery progress for the author.
final class RelayCoreRoomTests: XCTestCase {
    private let alice = ConnectionID(1)

    private func post() -> SIMPMessage {
        var post = SIMPMessage(kind: .text, messageId: 900, fromUser: "alice", toUser: "#lobby", content: "hi all")
        post.stream = 900
        post.seq = 4
        return post
    }

    /// Member `member`'s copy of `post()`, number 17 of #lobby with two recipients.
    private func copy(for member: String) -> SIMPMessage {
        var copy = post()
        copy.fromUser = "#lobby"
        copy.toUser = member
        copy.room = "lobby"
        copy.author = "alice"
        copy.authorMessageId = 900
        copy.memberCount = 2
        copy.messageId = 17
        copy.stream = RelayCore.roomStream
        copy.seq = 17
        copy.floor = 0
        return copy
    }

    func testAPostBecomesOneNumberedCopyPerOtherMemberAndTheAuthorHearsStored() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        let request = StoreRequest.postToRoom(room: "lobby", message: post())
        XCTAssertEqual(relay.send(post()), [.store(request)])

        var stored = statusReceipt(900, from: "#lobby", to: "alice", .stored)
        stored.room = "lobby"
        stored.memberCount = 2
        stored.seq = 17
        XCTAssertEqual(
            relay.answer(.postToRoom(room: "lobby", message: post(), .posted(seq: 17, members: ["carol", "alice", "bob"], duplicate: false))),
            [
                .send(alice, stored), .store(.storeInInbox(user: "bob", message: copy(for: "bob"))),
                .store(.storeInInbox(user: "carol", message: copy(for: "carol"))),
            ])
        stored.memberCount = 1
        XCTAssertEqual(
            relay.answer(.postToRoom(room: "lobby", message: post(), .posted(seq: 17, members: ["alice", "bob"], duplicate: true))),
            [.send(alice, stored)], "a retransmitted post is receipted again, not fanned out again")
        XCTAssertEqual(
            relay.answer(.postToRoom(room: "lobby", message: post(), .notAMember)),
            [
                .reject(.notAMember, detail: "alice posted to #lobby"),
                .send(alice, .error(.notAMember, "you are not a member of #lobby", messageId: 900, to: "alice")),
            ])
        XCTAssertEqual(relay.fail(request, StoreFailure("down")), [.reject(.inboxUnavailable, detail: "alice -> #lobby")])
        XCTAssertFalse(RelayCore.isValidRoomName("has space"))
        XCTAssertFalse(RelayCore.isValidRoomName(""))
        XCTAssertTrue(RelayCore.isValidRoomName("team-1.dev_x"))
    }

    func testJoinAsksTheStoreAndItsAnswerGoesBackSorted() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        var join = SIMPMessage(kind: .roomJoin, messageId: 4)
        join.room = "lobby"
        let joining = RoomRequest(operation: .join, room: "lobby", user: "alice", connection: alice, messageId: 4)
        let request = StoreRequest.room(joining)
        XCTAssertEqual(relay.control(join, on: alice), [.store(request)])
        var members = SIMPMessage(kind: .roomMembers, messageId: 4, toUser: "alice")
        members.room = "lobby"
        members.members = ["alice", "bob"]
        XCTAssertEqual(relay.answer(.room(joining, .members(["bob", "alice"]))), [.send(alice, members)])
        XCTAssertEqual(
            relay.fail(request, StoreFailure("down")),
            [.send(alice, .error(.internal, "room registry unavailable, try again", messageId: 4))])
        join.room = "bad room"
        XCTAssertEqual(
            relay.control(join, on: alice),
            [
                .reject(.missingField, detail: "\(SIMPMessage.Kind.roomJoin) with room \"bad room\" from alice"),
                .send(alice, .error(.badRequest, "a room name has 1-64 letters, digits, '.', '_' or '-'", messageId: 4)),
            ])
    }

    func testTheAuthorHearsHowManyMembersHaveThePost() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        var progress = statusReceipt(900, from: "#lobby", to: "alice", .roomDelivered)
        progress.room = "lobby"
        progress.memberCount = 2
        progress.deliveredCount = 1
        progress.members = ["bob"] // whose receipt was counted
        XCTAssertEqual(relay.answer(.countRoomDelivery(copy: copy(for: "bob"), delivered: 1)), [.send(alice, progress)])
        XCTAssertEqual(relay.fail(.countRoomDelivery(copy: copy(for: "bob")), StoreFailure("down")), [])
    }

    func testRelayedCopiesWithoutAFloorGetTheLowestPendingSeq() {
        var sender = ReliableSender(firstMessageId: 1, keepsSenderSequence: true)
        func copy(_ seq: UInt64) -> SIMPMessage {
            var message = SIMPMessage(kind: .text, messageId: seq, fromUser: "#lobby", toUser: "bob")
            message.stream = 1
            message.seq = seq
            return message
        }
        let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
        XCTAssertEqual(sender.submit(copy(5), now: t0).output.transmit.map(\.floor), [5])
        XCTAssertEqual(sender.submit(copy(8), now: t0).output.transmit.map(\.floor), [5], "5 is still pending")
        var receipt = copy(5).receipt(holdMicros: 0)
        receipt.attempt = 1
        _ = sender.handleReceipt(receipt, now: t0 + .milliseconds(1))
        XCTAssertEqual(sender.submit(copy(9), now: t0 + .milliseconds(2)).output.transmit.map(\.floor), [8])
    }

    func testRoomFieldsRoundTrip() throws {
        var reply = SIMPMessage(kind: .roomMembers, messageId: 3, toUser: "alice")
        reply.room = "lobby"
        reply.members = ["alice", "bob", "日本"]
        reply.author = "x"
        reply.authorMessageId = 7
        reply.memberCount = 3
        reply.deliveredCount = 2
        XCTAssertEqual(try MessageCodec.decode(MessageCodec.encode(reply)), reply)
        XCTAssertEqual(try MessageCodec.decode(MessageCodec.encode(SIMPMessage(kind: .roomJoin))).members, [])
    }
}

/// READ markers and typing in the relay core.
final class RelayCoreReadMarkerTests: XCTestCase {
    func testReadMarkerForAnOfflineSenderIsStoredAndTypingForAnOfflineUserIsDropped() throws {
        var relay = DevRelay()
        let bob = ConnectionID(1)
        try relay.connect("bob", on: bob, port: 5001)
        let marker = SIMPMessage(kind: .read, messageId: 12, fromUser: "bob", toUser: "alice")
        XCTAssertEqual(
            relay.control(SIMPMessage(kind: .read, messageId: 12, fromUser: "mallory", toUser: "alice"), on: bob),
            [.store(.storeInInbox(user: "alice", message: marker))], "the relay vouches for the reader")
        XCTAssertEqual(InboxEntry(message: marker, storedAt: 1).dedupeKey, "d/12/bob")

        XCTAssertEqual(relay.send(SIMPMessage(kind: .typing, messageId: 1, fromUser: "bob", toUser: "alice")), [.store(.lookup(user: "alice"))])
        XCTAssertEqual(relay.answer(.lookup(user: "alice", .single(nil, known: true))), [], "not stored, not refused")
        XCTAssertEqual(relay.send(SIMPMessage(kind: .typing, messageId: 2, fromUser: "bob", toUser: "#room")), [])
    }
}
