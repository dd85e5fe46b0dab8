import SIMPChat
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// A room's members as `simp chat` learns them: who joined and who left, and a post where no
/// one else is in the room.
extension ChatSessionTests {
    func testJoinsAndLeavesAreSaidWhenTheRelayListsTheMembersAgain() {
        start()
        type("/join lobby\r")
        session.roomAnswered(.join("lobby"), .success(["alice", "bob"]))
        session.roomAnswered(.watch("lobby"), .success(["alice", "bob", "carol"]))
        session.roomAnswered(.watch("lobby"), .success(["alice", "carol"]))
        session.roomAnswered(.watch("lobby"), .failure(ChatRoomError("connection lost"))) // quiet
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(3), ["-- carol joined #lobby", "-- bob left #lobby", "#lobby>"])
    }

    /// A post from an author not in the last list says the author joined, before the post; a
    /// post addressed to another number of members asks for the list.
    func testAPostFromSomeoneNewSaysTheyJoinedFirst() {
        start()
        type("/join lobby\r")
        session.roomAnswered(.join("lobby"), .success(["alice", "bob"]))
        var post = SIMPMessage(kind: .text, messageId: 4, fromUser: "#lobby", toUser: "alice", content: "hello", time: 1)
        post.author = "dave"
        post.memberCount = 4
        let effects = session.receive(post.decrypted)
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(3), ["-- dave joined #lobby", "12:00 #lobby dave: hello", "#lobby>"])
        XCTAssertEqual(effects, [.room(.watch("lobby"))], "3 known, 4 addressed: the list is asked")
    }

    /// Alone in a room, a post is not "stored" for anyone: it says so, and the list is asked
    /// again; a post stored while the list still had others turns so when the list comes back.
    func testAPostInARoomWithNoOneElseSaysSo() {
        start()
        type("/join lobby\r")
        session.roomAnswered(.join("lobby"), .success(["alice"]))
        guard case .send(let ref, _)? = type("anyone?\r").first else { return XCTFail("not sent") }
        _ = session.submitted(ref: ref, messageId: 5)
        let effects = session.resolved(ref: ref, .stored)
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(2), ["12:00 you → #lobby: anyone? ✓ (no other members)", "#lobby>"])
        XCTAssertEqual(effects, [.recordStatus(messageId: 5, status: "no other members"), .room(.watch("lobby"))])

        session.roomAnswered(.watch("lobby"), .success(["alice", "bob"]))
        guard case .send(let second, _)? = type("bob?\r").first else { return XCTFail("not sent") }
        _ = session.submitted(ref: second, messageId: 6)
        _ = session.resolved(ref: second, .stored)
        session.roomAnswered(.watch("lobby"), .success(["alice"]))
        refresh()
        XCTAssertEqual(
            terminal.transcript.suffix(4),
            ["-- bob joined #lobby", "12:00 you → #lobby: bob? ✓ (no other members)", "-- bob left #lobby", "#lobby>"])

        var kept = HistoryEntry(id: 6, time: 1, from: "alice", to: "#lobby", kind: "text", text: "bob?")
        kept.status = "no other members"
        start(history: [kept])
        XCTAssertTrue(terminal.transcript.contains("12:00 you → #lobby: bob? ✓ (no other members)"), "as the history keeps it")
    }
}

/// irssi's habits: `/msg`, `/query`, `/me`, `/part`, `/clear`.
extension ChatCommandTests {
    func testIrssiHabitsAreAccepted() {
        XCTAssertEqual(ChatCommand.parse("/msg bob hello there"), .say("hello there", to: "bob"))
        XCTAssertEqual(ChatCommand.parse("/msg bob"), .invalid("usage: /msg NAME TEXT (or @NAME TEXT)"))
        XCTAssertEqual(ChatCommand.parse("/query carol"), .switchPeer("carol"))
        XCTAssertEqual(ChatCommand.parse("/me waves  at you"), .action("waves  at you"))
        XCTAssertEqual(ChatCommand.parse("/me"), .invalid("usage: /me ACTION"))
        XCTAssertEqual(ChatCommand.parse("/part"), .leave(room: nil))
        XCTAssertEqual(ChatCommand.parse("/part #lobby"), .leave(room: "lobby"))
        XCTAssertEqual(ChatCommand.parse("/clear"), .clear)
        XCTAssertEqual(ChatCommand.parse("/reconnect"), .reconnect)
        for command in ["/msg", "/me", "/part", "/clear", "/reconnect", "/query"] {
            XCTAssertTrue(ChatCommand.helpLines.contains { $0.contains(command) }, "/help names \(command)")
        }
        XCTAssertTrue(ChatCommand.helpLines.allSatisfy { $0.count <= 80 })
    }
}

extension ChatSessionTests {
    /// `/me waves` travels as the text `/me waves` and is shown as an action on both sides.
    func testAnActionIsShownAsOne() {
        start(peer: "bob")
        guard case .send(_, let message)? = type("/me waves\r").first else { return XCTFail("not sent") }
        XCTAssertEqual(message.content, "/me waves")
        _ = session.receive(SIMPMessage(kind: .text, messageId: 9, fromUser: "bob", toUser: "alice", content: "/me waves back", time: 5).decrypted)
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(3), ["12:00 you → bob: * alice waves …", "12:00 * bob waves back", "bob>"])
    }

    /// `/clear` leaves an empty screen with the input line; what comes next is shown as usual.
    func testClearEmptiesTheScreen() {
        start(peer: "bob")
        _ = session.receive(SIMPMessage(kind: .text, messageId: 9, fromUser: "bob", toUser: "alice", content: "old", time: 5).decrypted)
        type("/clear\r")
        XCTAssertEqual(terminal.lines.filter { !$0.isEmpty }, ["bob>"])
        _ = session.receive(SIMPMessage(kind: .text, messageId: 10, fromUser: "bob", toUser: "alice", content: "new", time: 5).decrypted)
        refresh()
        XCTAssertEqual(terminal.lines.filter { !$0.isEmpty }, ["12:00 bob: new", "bob>"])
    }
}

/// Room admission in `simp chat` (docs/E2E.md §8.4): a join by name is shown with the command
/// that admits, and `/admit` asks the client to admit (in the current room by default).
extension ChatSessionTests {
    func testAJoinByNameIsShownWithTheAdmitCommandAndAdmitAsksTheClient() {
        start()
        type("/join lobby\r")
        session.roomAnswered(.join("lobby"), .success(["alice", "bob"]))
        session.endToEndNoticed(.roomJoinNotAdmitted(user: "carol", room: "lobby"))
        refresh()
        XCTAssertEqual(
            terminal.transcript.last(where: { $0.contains("carol") }),
            "-- carol joined #lobby by name and cannot read it; /admit carol #lobby to let carol read")
        XCTAssertEqual(type("/admit carol\r"), [.room(.admit("lobby", user: "carol"))])
        XCTAssertEqual(ChatCommand.parse("/admit carol #ops"), .admit(user: "carol", room: "ops"))
        XCTAssertEqual(ChatCommand.parse("/admit #ops"), .invalid("usage: /admit NAME [ROOM]"))
        session.endToEndNoticed(.roomAdmitted(user: "carol", room: "lobby", by: "alice"))
        refresh()
        XCTAssertEqual(
            terminal.transcript.last(where: { $0.contains("admitted") }),
            "-- carol was admitted to #lobby by alice; carol reads the posts from the next one")
    }
}
