import NIOCore
import SIMPChat
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// Rooms and stored messages in `simp chat`: commands in, effects and screen out.
extension ChatSessionTests {
    func testJoinMakesTheRoomTheCurrentPeerAndRoomPostsShowTheirAuthor() {
        start()
        XCTAssertEqual(type("/join #lobby\r"), [.room(.join("lobby"))])
        session.roomAnswered(.join("lobby"), .success(["alice", "bob"]))
        refresh()
        XCTAssertTrue(terminal.transcript.contains { $0.contains("joined #lobby (alice, bob)") }, "\(terminal.transcript)")
        guard case .send(_, let message)? = type("hi room\r").first else { return XCTFail("not sent") }
        XCTAssertEqual(message.toUser, "#lobby")

        var post = SIMPMessage(kind: .text, messageId: 4, fromUser: "#lobby", toUser: "alice", content: "hello", time: 1)
        post.author = "bob"
        _ = session.receive(post.decrypted)
        refresh()
        XCTAssertTrue(terminal.transcript.contains("12:00 #lobby bob: hello"), "\(terminal.transcript)")

        XCTAssertEqual(type("/members\r"), [.room(.members("lobby"))])
        XCTAssertEqual(type("/leave\r"), [.room(.leave("lobby"))])
        session.roomAnswered(.leave("lobby"), .success([]))
        XCTAssertEqual(type("/members\r"), [], "no current room after leaving")
        session.roomAnswered(.members("x"), .failure(ChatRoomError("you are not a member of #x")))
        refresh()
        XCTAssertTrue(terminal.transcript.contains { $0.contains("/members #x: you are not a member of #x") })
    }

    func testStoredMarkTurnsDeliveredWhenTheRelayReportsIt() {
        start(peer: "bob")
        guard case .send(let ref, _)? = type("are you there\r").first else { return XCTFail("not sent") }
        _ = session.submitted(ref: ref, messageId: 77)
        _ = session.resolved(ref: ref, .stored)
        refresh()
        XCTAssertTrue(terminal.transcript.contains("12:00 you → bob: are you there ✓ (stored)"), "\(terminal.transcript)")
        let effects = session.noticed(.delivered(messageId: 77, to: "bob"))
        refresh()
        XCTAssertTrue(terminal.transcript.contains("12:00 you → bob: are you there ✓✓"), "\(terminal.transcript)")
        XCTAssertEqual(effects, [.recordStatus(messageId: 77, status: "delivered")])
        _ = session.resolved(ref: ref, .stored)
        guard case .delivered = session.outgoing[ref].status else { return XCTFail("a late stored undid delivered") }
    }

    /// The relay took custody because bob has two known devices, but one is
    /// online (STORED with receiverOnline): the mark and the follow-up line never say "offline"
    /// nor "stored", and the message counts as settled at the end of input.
    func testCustodyWhileTheReceiverIsOnlineIsNeverCalledOffline() {
        let custody = DeliveryStatus(SendResult.stored(messageId: 77, receiverOnline: true))
        XCTAssertEqual(custody, .sentToDevices)
        start(peer: "bob")
        guard case .send(let ref, _)? = type("are you there\r").first else { return XCTFail("not sent") }
        _ = session.submitted(ref: ref, messageId: 77)
        let effects = session.resolved(ref: ref, custody)
        refresh()
        XCTAssertTrue(terminal.transcript.contains("12:00 you → bob: are you there ✓ (to devices)"), "\(terminal.transcript)")
        XCTAssertTrue(effects.contains(.recordStatus(messageId: 77, status: "sent to devices")), "\(effects)")

        start(interactive: false, peer: "bob")
        guard case .send(let plainRef, _)? = type("hi\r").first else { return XCTFail("not sent") }
        _ = session.submitted(ref: plainRef, messageId: 78)
        _ = session.resolved(ref: plainRef, custody)
        refresh()
        XCTAssertTrue(terminal.transcript.contains("✓ sent to bob's devices: \"hi\""), "\(terminal.transcript)")
        XCTAssertFalse(terminal.transcript.contains { $0.contains("offline") || $0.contains("stored") }, "\(terminal.transcript)")
        XCTAssertEqual(session.endOfInput(), [.quit(status: 0)], "settled: the relay delivers it")
    }
}

extension ChatSessionTests {
    func testReadMarkersTypingAndWho() {
        start(peer: "bob")
        let fromBob = SIMPMessage(kind: .text, messageId: 50, fromUser: "bob", toUser: "alice", content: "hi", time: 1)
        XCTAssertEqual(session.receive(fromBob).last, .markRead(from: "bob", upTo: 50), "the current peer's message is seen at once")
        let fromCarol = SIMPMessage(kind: .text, messageId: 60, fromUser: "carol", toUser: "alice", content: "psst", time: 1)
        XCTAssertEqual(session.receive(fromCarol), [], "carol's message is not seen yet (and the history has it already)")
        XCTAssertEqual(type("/to carol\r"), [.who(users: ["carol"], room: nil, show: false), .markRead(from: "carol", upTo: 60)])

        XCTAssertEqual(type("h"), [.typing(to: "carol")])
        XCTAssertEqual(type("e"), [], "at most one typing indicator per window")
        session.peerEvent(.typing(from: "carol"))
        refresh()
        XCTAssertTrue(terminal.transcript.last?.hasPrefix("carol (typing…)>") == true, "\(terminal.transcript)")
        type("\u{7f}\u{7f}")

        guard case .send(let ref, _)? = type("hello\r").first else { return XCTFail("not sent") }
        _ = session.submitted(ref: ref, messageId: 9)
        _ = session.resolved(ref: ref, .delivered(latencyMillis: 1))
        XCTAssertEqual(session.noticed(.read(upTo: 9, by: "carol")), [.recordStatus(messageId: 9, status: "read")])
        refresh()
        XCTAssertTrue(terminal.transcript.contains("12:00 you → carol: hello ✓✓ read"), "\(terminal.transcript)")

        XCTAssertEqual(type("/who\r"), [.who(users: ["carol"], room: nil, show: true)])
        XCTAssertEqual(type("/who #lobby\r"), [.who(users: [], room: "lobby", show: true)])
        session.whoAnswered(.success([PresenceEntry(user: "carol", online: false, lastSeen: 5)]), show: true)
        session.peerEvent(.presence(user: "dave", online: true, lastSeen: 9))
        refresh()
        XCTAssertTrue(terminal.transcript.contains("-- carol: offline, last seen 12:00"), "\(terminal.transcript)")
        XCTAssertTrue(terminal.transcript.contains("-- dave is online"), "\(terminal.transcript)")

        session.sendsReadMarkers = false
        let quiet = SIMPMessage(kind: .text, messageId: 61, fromUser: "carol", toUser: "alice", content: "again", time: 1)
        XCTAssertEqual(session.receive(quiet), [], "read markers can be turned off")
    }
}
