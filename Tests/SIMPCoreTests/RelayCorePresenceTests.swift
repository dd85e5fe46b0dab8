import NIOCore
import SIMPCore
import SIMPCoreTestKit
import XCTest

/// Presence in the relay core: who is shown a user's presence (users it shares a conversation
/// or a room with, nobody when it turned presence off), to the minute, and the notes of who sent
/// content to whom that decide it.
final class RelayCorePresenceTests: XCTestCase {
    private let alice = ConnectionID(1), carol = ConnectionID(2), bob = ConnectionID(3)

    private func who(_ users: [String], by user: String = "alice", on connection: ConnectionID? = nil) -> WhoRequest {
        WhoRequest(user: user, connection: connection ?? alice, messageId: 9, users: users, room: nil)
    }

    private func whoReply(_ lines: [String]) -> SIMPMessage {
        var reply = SIMPMessage(kind: .who, messageId: 9, toUser: "alice")
        reply.members = lines
        return reply
    }

    private func presence(of user: String = "bob", to peer: String, online: Bool = true, lastSeen: Int64) -> SIMPMessage {
        var frame = SIMPMessage(kind: .presence, fromUser: user, toUser: peer)
        frame.online = online
        frame.lastSeen = lastSeen
        return frame
    }

    func testPresenceGoesToFollowersAndRoomPeersConnectedHereToTheMinute() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        try relay.connect("carol", on: carol, port: 5002)
        try relay.connect("bob", on: bob, port: 5003)
        XCTAssertEqual(
            relay.closed(bob),
            [
                .event(.userDisconnected(relay.registration(of: "bob"), .connectionClosed)), .store(.unregister(user: "bob", session: "r1/3")),
                .store(.recordPresence(user: "bob", online: false)),
            ])

        let seen: Int64 = 1_700_000_039_999 // one millisecond before a minute ends
        let bobShares = PresenceEntry(user: "bob", online: false, lastSeen: seen, sharesConversation: true)
        XCTAssertEqual(
            relay.answer(.who(who(["bob"]), [bobShares])), [.send(alice, whoReply(["bob offline 1699999980000"]))],
            "bob sent alice content: she is shown his last-seen, rounded down to the minute")
        XCTAssertEqual(
            relay.answer(.recordPresence(user: "bob", online: true, lastSeen: seen + 2, roomPeers: ["bob", "carol", "dave"])),
            [
                .send(alice, presence(to: "alice", lastSeen: 1_700_000_040_000)), .send(carol, presence(to: "carol", lastSeen: 1_700_000_040_000)),
                .store(.lookup(user: "dave")),
            ],
            "follower alice and room peer carol here; dave's relay, if any, hears it through the store")
    }

    func testAStrangerIsToldTheSameOfAUserAsOfNoUserAndFollowsNeither() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        let bobStranger = PresenceEntry(user: "bob", online: true, lastSeen: 1_700_000_000_000, sharesConversation: false)
        let nobody = PresenceEntry(user: "nobody", online: false, lastSeen: -1, sharesConversation: false)
        XCTAssertEqual(
            relay.answer(.who(who(["bob", "nobody"]), [bobStranger, nobody])), [.send(alice, whoReply(["bob offline -1", "nobody offline -1"]))],
            "online bob, who never sent alice anything nor shares a room with her, is answered as a user who does not exist")
        XCTAssertEqual(
            relay.answer(.recordPresence(user: "bob", online: false, lastSeen: 1_700_000_100_000, roomPeers: [])), [],
            "nor is alice told when he goes")
    }

    func testPresenceOffHidesAUserFromContactsAndRoomPeers() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        _ = relay.open(carol)
        var connect = DevRelay.connectMessage("carol", udpPort: 5002)
        connect.hidePresence = true
        _ = relay.control(connect, on: carol)
        let registered = try relay.complete("carol", on: carol, port: 5002)
        XCTAssertEqual(registered.last, .store(.recordPresence(user: "carol", online: true, hidden: true)), "the login turned presence off")

        let carolShares = PresenceEntry(user: "carol", online: true, lastSeen: 1_700_000_000_000, sharesConversation: true, hidden: true)
        XCTAssertEqual(relay.answer(.who(who(["carol"]), [carolShares])), [.send(alice, whoReply(["carol offline -1"]))])
        XCTAssertEqual(
            relay.answer(.recordPresence(user: "carol", online: true, lastSeen: 1_700_000_000_000, roomPeers: ["alice", "carol"], hidden: true)), [],
            "not even a room peer is told")
        XCTAssertEqual(
            relay.closed(carol),
            [
                .event(.userDisconnected(relay.registration(of: "carol"), .connectionClosed)),
                .store(.unregister(user: "carol", session: "r1/2")), .store(.recordPresence(user: "carol", online: false, hidden: true)),
            ])

        // Her next login without it shows her again.
        try relay.connect("carol", on: ConnectionID(4), port: 5004)
        XCTAssertEqual(relay.closed(ConnectionID(4)).last, .store(.recordPresence(user: "carol", online: false)))
    }

    func testContentToAUserIsNotedOncePerHourButTypingAndRoomPostsAreNot() throws {
        var relay = DevRelay()
        relay.keepsContactNotes = true
        try relay.connect("alice", on: alice, port: 5001)
        try relay.connect("bob", on: bob, port: 5003)
        func notes(_ actions: [RelayAction]) -> [RelayAction] {
            actions.filter { if case .store(.noteContact) = $0 { true } else { false } }
        }
        let note = RelayAction.store(.noteContact(user: "alice", peer: "bob"))
        func text(_ id: UInt64, to peer: String = "bob") -> SIMPMessage {
            SIMPMessage(kind: .text, messageId: id, fromUser: "alice", toUser: peer, content: "hi")
        }
        XCTAssertEqual(notes(relay.send(text(1))), [note], "alice's first message to bob")
        XCTAssertEqual(notes(relay.send(text(2), now: DevRelay.t0 + .minutes(59))), [], "noted within the hour")
        XCTAssertEqual(notes(relay.send(text(3), now: DevRelay.t0 + .minutes(61))), [note], "noted again after it")
        XCTAssertEqual(
            notes(relay.send(SIMPMessage(kind: .typing, messageId: 4, fromUser: "alice", toUser: "bob"), now: DevRelay.t0 + .minutes(180))), [],
            "typing is no conversation")
        XCTAssertEqual(notes(relay.send(text(5, to: "#lobby"))), [], "a room post: the room is the relation")
        XCTAssertEqual(
            notes(relay.send(SIMPMessage(kind: .text, messageId: 6, fromUser: "bob", toUser: "alice", content: "yo"))),
            [.store(.noteContact(user: "bob", peer: "alice"))], "each direction on its own")
        XCTAssertEqual(
            notes(relay.send(text(7, to: "carol"), now: DevRelay.t0 + .minutes(62))), [.store(.noteContact(user: "alice", peer: "carol"))],
            "another peer of the same session")
        XCTAssertEqual(notes(relay.send(text(8), now: DevRelay.t0 + .minutes(63))), [], "bob again: noted at minute 61, within the hour")
        XCTAssertEqual(notes(relay.send(text(9), now: DevRelay.t0 + .minutes(122))), [note], "and again after it")
    }

    func testPresenceEntryTextRoundTripsUserIdsWithSpaces() {
        let entry = PresenceEntry(user: "ann marie", online: true, lastSeen: 123)
        XCTAssertEqual(PresenceEntry(text: entry.text), entry)
        XCTAssertNil(PresenceEntry(text: "bob maybe 1"))
    }
}
