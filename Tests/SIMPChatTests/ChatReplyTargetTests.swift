import Foundation
import SIMPChat
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// Who a plain line goes to when the user never chose: the last person who wrote, and who the
/// user talked to when the last session ended.
extension ChatSessionTests {
    /// bob, started without a peer, gets a message from carol and types a reply: it goes to
    /// carol, and her message is marked read at once (it is on his screen, in his conversation).
    func testWithNoOneChosenTheSenderOfADirectMessageGetsTheReply() {
        start(peer: nil)
        let effects = session.receive(SIMPMessage(kind: .text, messageId: 9, fromUser: "carol", toUser: "alice", content: "hi?", time: 5).decrypted)
        refresh()
        XCTAssertEqual(session.peer, "carol")
        XCTAssertTrue(effects.contains(.markRead(from: "carol", upTo: 9)), "seen while on screen: \(effects)")
        XCTAssertTrue(effects.contains(.who(users: ["carol"], room: nil, show: false)), "her presence is followed: \(effects)")
        XCTAssertEqual(
            terminal.transcript.suffix(3), ["12:00 carol: hi?", "-- replies go to carol (/to NAME to talk to someone else)", "carol>"])
        guard case .send(_, let reply)? = type("yes\r").first else { return XCTFail("no one to send to: \(terminal.transcript)") }
        XCTAssertEqual(reply.toUser, "carol")
    }

    /// A room post does not choose a peer, and neither does a message once one is chosen.
    func testARoomPostOrAChosenPeerKeepsTheReplyTarget() {
        start(peer: nil)
        var post = SIMPMessage(kind: .text, messageId: 4, fromUser: "#lobby", toUser: "alice", content: "hello", time: 1)
        post.author = "bob"
        _ = session.receive(post.decrypted)
        XCTAssertNil(session.peer)
        start(peer: "bob")
        let effects = session.receive(SIMPMessage(kind: .text, messageId: 9, fromUser: "carol", toUser: "alice", content: "hi?", time: 5).decrypted)
        XCTAssertEqual(session.peer, "bob")
        XCTAssertFalse(effects.contains(.markRead(from: "carol", upTo: 9)), "not in the conversation on screen")
    }

    /// The peer of the last session is where the next one starts (without --to), and says so.
    func testThePeerOfTheLastSessionIsRememberedBesideTheHistory() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-peer-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try HistoryStore(directory: directory, user: "alice")
        XCTAssertNil(store.loadLastPeer())
        try store.saveLastPeer("carol")
        XCTAssertEqual(try HistoryStore(directory: directory, user: "alice").loadLastPeer(), "carol")
        XCTAssertEqual(store.lastPeerURL.deletingLastPathComponent().path, store.url.deletingLastPathComponent().path)
        try store.saveLastPeer(nil)
        XCTAssertNil(store.loadLastPeer())

        session = ChatSession(
            user: "alice", peer: "carol", screen: Screen(width: terminal.width, height: terminal.height, interactive: true, colors: false),
            clock: clock)
        session.peerIsFromLastTime = true
        session.start()
        refresh()
        XCTAssertTrue(
            terminal.transcript.contains("-- you are alice; talking to carol (as when you left; /to NAME to change); /help for commands"),
            "\(terminal.transcript)")
    }
}
