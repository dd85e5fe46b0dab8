import NIOCore
import SIMPChat
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// Habits from irssi/weechat and quiet status updates, in `ChatSession`.
extension ChatSessionTests {
    /// Sends `text` to the current peer and has it delivered as `id`; returns its ref.
    @discardableResult
    func sendDelivered(_ text: String, id: UInt64) -> Int? {
        guard case .send(let ref, _)? = type(text + "\r").first else { XCTFail("not sent: \(text)"); return nil }
        _ = session.submitted(ref: ref, messageId: id)
        _ = session.resolved(ref: ref, .delivered(latencyMillis: 1))
        refresh()
        return ref
    }

    func testReadMarkersNeverFloodTheScreenOnceMessagesScrolledOff() {
        start(peer: "dave")
        // 20 exchanges on an 8-row screen: each of alice's messages is read when dave answers.
        for number in 1...20 {
            sendDelivered("c msg \(number)", id: UInt64(number))
            _ = session.receive(
                SIMPMessage(
                    kind: .text, messageId: UInt64(100 + number), fromUser: "dave", toUser: "alice",
                    content: "d msg \(number)", time: 1))
            _ = session.noticed(.read(upTo: UInt64(number), by: "dave"))
            if number == 10 { type("\u{c}") } // Ctrl-L
            refresh()
        }
        let readLines = terminal.transcript.filter { $0.contains("read by") }
        XCTAssertEqual(readLines, [], "each mark turns ✓✓ read in place; nothing is reprinted")
        XCTAssertTrue(terminal.lines.contains("12:00 you → dave: c msg 20 ✓✓ read"), "\(terminal.lines)")
        XCTAssertEqual(session.outgoing.messages.filter { $0.status == .read }.count, 20)

        // Messages that scrolled off and are read later change quietly, with one summary line.
        for number in 21...23 { sendDelivered("late \(number)", id: UInt64(number)) }
        for number in 1...8 {
            _ = session.receive(SIMPMessage(kind: .text, messageId: UInt64(200 + number), fromUser: "dave", toUser: "alice", content: "x", time: 1))
        }
        refresh()
        let effects = session.noticed(.read(upTo: 23, by: "dave"))
        refresh()
        XCTAssertEqual(effects.count, 3, "all three are recorded as read")
        XCTAssertEqual(terminal.transcript.filter { $0.contains("read by") }, ["✓✓ read by dave: \"late 23\" and 2 earlier"])
        XCTAssertTrue(session.screen.scrollback.map(\.plain).contains("12:00 you → dave: late 21 ✓✓ read"), "the scrollback has the new mark")
    }

    func testTabCompletesCommandsNamesAndRooms() {
        start(peer: "bob")
        _ = session.receive(SIMPMessage(kind: .text, messageId: 1, fromUser: "carol", toUser: "alice", content: "hi", time: 1))
        _ = session.receive(SIMPMessage(kind: .text, messageId: 2, fromUser: "carla", toUser: "alice", content: "yo", time: 1))
        session.roomAnswered(.join("lobby"), .success(["alice", "dave"]))
        type("/jo\t")
        XCTAssertEqual(session.editor.text, "/join ")
        type("lo\t")
        XCTAssertEqual(session.editor.text, "/join #lobby ")
        type("\u{15}@da\t")
        XCTAssertEqual(session.editor.text, "@dave ")
        type("\u{15}/to car\t")
        XCTAssertEqual(session.editor.text, "/to car", "carol and carla agree on car only")
        type("\t")
        XCTAssertEqual(terminal.transcript.suffix(2).first, "carla  carol", "a second Tab lists them")
        type("o\t")
        XCTAssertEqual(session.editor.text, "/to carol ")
        XCTAssertEqual(
            Completion.complete(text: "say hi to bo now", cursor: 12, names: ["bob"], commands: []),
            Completion.Outcome(text: "say hi to bob now", cursor: 14, listed: []), "in the middle of a line too")
    }

    func testOtherConversationsAreCountedInThePromptAndRingTheBell() {
        start(peer: "bob")
        _ = session.takeOutput()
        _ = session.receive(SIMPMessage(kind: .text, messageId: 1, fromUser: "carol", toUser: "alice", content: "psst", time: 1))
        let output = session.takeOutput()
        terminal.feed(output)
        XCTAssertTrue(output.contains("\u{7}"), "the bell rings for a message from someone else")
        _ = session.receive(SIMPMessage(kind: .text, messageId: 2, fromUser: "carol", toUser: "alice", content: "again", time: 1))
        var post = SIMPMessage(kind: .text, messageId: 3, fromUser: "#lobby", toUser: "alice", content: "room talk", time: 1)
        post.author = "dave"
        _ = session.receive(post)
        let quiet = session.takeOutput()
        terminal.feed(quiet)
        XCTAssertEqual(quiet.filter { $0 == "\u{7}" }.count, 1, "once for carol's second message, never for room posts")
        XCTAssertEqual(terminal.cursorLine, "[#lobby 1, carol 2] bob>")
        _ = session.receive(SIMPMessage(kind: .text, messageId: 4, fromUser: "bob", toUser: "alice", content: "here", time: 1))
        XCTAssertFalse(session.takeOutput().contains("\u{7}"), "no bell for the current peer")
        type("/to carol\r")
        XCTAssertEqual(terminal.cursorLine, "[#lobby 1] carol>", "switching clears its count")

        session.rings = false
        _ = session.receive(SIMPMessage(kind: .text, messageId: 5, fromUser: "bob", toUser: "alice", content: "quiet", time: 1))
        XCTAssertFalse(session.takeOutput().contains("\u{7}"), "--no-bell")
    }

    func testANewLineMarksTheFirstMessageAfterTheHistory() {
        start(peer: "bob", history: [HistoryEntry(id: 1, time: 0, from: "bob", to: "alice", kind: "text", text: "old")])
        _ = session.receive(
            SIMPMessage(kind: .text, messageId: 2, fromUser: "bob", toUser: "alice", content: "while you were away", time: 1).decrypted)
        _ = session.receive(SIMPMessage(kind: .text, messageId: 3, fromUser: "bob", toUser: "alice", content: "and now", time: 1).decrypted)
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(4), ["— new —", "12:00 bob: while you were away", "12:00 bob: and now", "bob>"])
    }

    /// A member's receipt can be counted before the client hands the chat the post's id (it
    /// does once the post is on disk): the count is shown then, and the later "stored" keeps it.
    func testRoomProgressBeforeThePostsIdIsShownWhenTheIdComes() {
        start(peer: "#lobby")
        guard case .send(let ref, _)? = type("quick\r").first else { return XCTFail("not sent") }
        _ = session.noticed(.roomProgress(messageId: 31, room: "lobby", delivered: 1, of: 1))
        _ = session.submitted(ref: ref, messageId: 31)
        _ = session.resolved(ref: ref, .stored)
        refresh()
        XCTAssertEqual(session.outgoing[ref].status, .roomDelivered(1, of: 1))
        XCTAssertTrue(terminal.transcript.contains("12:00 you → #lobby: quick ✓✓ 1/1"), "\(terminal.transcript)")
    }

    func testRoomPostsCountTheirMembersAndAudioIsSentAndShown() {
        start(peer: "#lobby")
        guard case .send(let ref, _)? = type("hi all\r").first else { return XCTFail("not sent") }
        _ = session.submitted(ref: ref, messageId: 30)
        _ = session.resolved(ref: ref, .stored)
        _ = session.noticed(.roomProgress(messageId: 30, room: "lobby", delivered: 1, of: 2))
        refresh()
        XCTAssertTrue(terminal.transcript.contains("12:00 you → #lobby: hi all ✓ 1/2"), "\(terminal.transcript)")
        let effects = session.noticed(.roomProgress(messageId: 30, room: "lobby", delivered: 2, of: 2))
        refresh()
        XCTAssertTrue(terminal.transcript.contains("12:00 you → #lobby: hi all ✓✓ 2/2"), "\(terminal.transcript)")
        XCTAssertEqual(effects, [.recordStatus(messageId: 30, status: "delivered 2/2")])
        _ = session.resolved(ref: ref, .stored)
        XCTAssertEqual(session.outgoing[ref].status, .roomDelivered(2, of: 2), "a late stored changes nothing")

        guard case .send(_, let audio)? = type("/audio https://example.com/hello.ogg\r").first else { return XCTFail("no audio") }
        XCTAssertEqual(audio.kind, .audio)
        XCTAssertEqual(audio.content, "https://example.com/hello.ogg")
        _ = session.receive(
            SIMPMessage(kind: .audio, messageId: 8, fromUser: "bob", toUser: "alice", content: "https://x.org/a.mp3", time: 1).decrypted)
        refresh()
        XCTAssertTrue(terminal.transcript.contains("12:00 bob: [audio] https://x.org/a.mp3"), "\(terminal.transcript)")
    }

    func testWhoSaysNoPresenceInformationAndHelpFitsEightyColumns() {
        start(peer: "bob")
        session.whoAnswered(.success([PresenceEntry(user: "nobody", online: false, lastSeen: -1)]), show: true)
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(2).first, "-- no presence information for nobody")
        for line in ChatCommand.helpLines { XCTAssertLessThanOrEqual(DisplayWidth.of(line), 80, line) }
    }

    /// A slow relay is news once per slow spell, not a line per message,
    /// and the messages keep their pending mark (not failed).
    func testMessagesWaitingForReceiptsAreReportedOncePerSlowSpell() {
        start(peer: "dave")
        for number in 1...3 {
            guard case .send(let ref, _)? = type("wait \(number)\r").first else { return XCTFail("not sent") }
            _ = session.submitted(ref: ref, messageId: UInt64(number))
        }
        for number in 1...3 { _ = session.noticed(.delayed(messageId: UInt64(number), to: "dave", waitedMillis: 5_000)) }
        refresh()
        let slow = terminal.transcript.filter { $0.contains("no receipt from dave for 5 s; still trying") }
        XCTAssertEqual(slow.count, 1, "\(terminal.transcript)")
        XCTAssertFalse(terminal.transcript.contains { $0.contains("✗") }, "delayed, not failed")
        _ = session.resolved(ref: 0, .delivered(latencyMillis: 6_000))
        _ = session.noticed(.delayed(messageId: 2, to: "dave", waitedMillis: 10_000))
        refresh()
        XCTAssertEqual(terminal.transcript.filter { $0.contains("no receipt from dave") }.count, 2, "a new spell after one settled")
    }
}
