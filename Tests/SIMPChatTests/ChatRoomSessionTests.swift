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
        _ = session.receive(post)
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
}
