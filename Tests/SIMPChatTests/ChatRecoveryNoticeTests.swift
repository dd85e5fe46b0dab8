import SIMPChat
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// What the chat says when a peer's device starts a new session (messages asked for and sent
/// again), what it resends from the outbox, and where a peer's new device is said.
extension ChatSessionTests {
    /// Messages asked for or sent again are counted on one line per peer device, without ids.
    func testMessagesSentAgainAreCountedOnOneLineWithoutIds() {
        start(peer: "bob")
        session.endToEndNoticed(.resent(user: "bob", device: "phone", messageId: 1_795_925_169_632_527, again: true))
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(2), ["-- bob's device phone started a new session; 1 message was sent again", "bob>"])
        session.endToEndNoticed(.resent(user: "bob", device: "phone", messageId: 1_795_925_169_632_528, again: true))
        session.endToEndNoticed(.askedAgain(user: "bob", device: "phone", messageId: 7))
        session.endToEndNoticed(.askedAgain(user: "bob", device: "phone", messageId: 8))
        refresh()
        XCTAssertEqual(
            terminal.transcript.suffix(3),
            [
                "-- bob's device phone started a new session; 2 messages were sent again",
                "-- 2 messages from bob (device phone) could not be decrypted here; asked for them again", "bob>",
            ])
        XCTAssertFalse(terminal.transcript.contains { $0.contains("1795925169632527") || $0.contains("message 7") }, "no raw ids")
    }

    /// What an earlier session left in the outbox: a message sealed before it was kept shows
    /// its text from the history; a frame of the end-to-end layer (a request to send a message
    /// again) is resubmitted as it is, not shown, not counted, not recorded.
    func testTheOutboxShowsSealedMessagesByTheirTextAndResubmitsFramesQuietly() {
        var kept = HistoryEntry(id: 31, time: 1, from: "alice", to: "bob", kind: "text", text: "are you there?")
        kept.status = "pending"
        var sealed = SIMPMessage(kind: .text, messageId: 31, toUser: "bob")
        sealed.e2ePayload = [1, 2, 3]
        var request = SIMPMessage(kind: .text, messageId: 32, toUser: "bob")
        request.e2ePayload = [4, 5, 6]
        let effects = startSession(history: [kept], showingHistory: 0, resending: [sealed, request])
        XCTAssertEqual(terminal.transcript.filter { $0.contains("being resent") }, ["-- 1 message from your last session is being resent"])
        XCTAssertTrue(terminal.transcript.contains("12:00 you → bob: are you there? …"), "\(terminal.transcript)")
        XCTAssertFalse(terminal.transcript.contains { $0.hasSuffix("bob:  …") || $0.hasSuffix("bob: …") }, "no blank line")
        guard effects.count == 2, case .resubmit(let frame) = effects[0], case .send(let ref, let sent) = effects[1] else {
            return XCTFail("\(effects)")
        }
        XCTAssertEqual(frame.messageId, 32)
        XCTAssertEqual(sent.e2ePayload, [1, 2, 3], "sent as it was sealed")
        XCTAssertEqual(session.submitted(ref: ref, messageId: 31), [.recordStatus(messageId: 31, status: "sent")], "its entry is updated, none added")
    }

    /// A peer's new device is said above the line of the message that was sealed for it.
    func testANewDeviceIsSaidAboveTheMessageSealedForIt() {
        start(peer: "bob")
        guard case .send(let ref, _)? = type("hello\r").first else { return XCTFail("not sent") }
        session.endToEndNoticed(.peer(.newDevice(user: "bob", device: "phone")))
        _ = session.submitted(ref: ref, messageId: 42)
        refresh()
        XCTAssertEqual(terminal.lines.filter { !$0.isEmpty }.suffix(3), ["-- bob has a new device: phone", "12:00 you → bob: hello ✓", "bob>"])
        // Its mark is still rewritten in place (its row moved down one).
        _ = session.resolved(ref: ref, .delivered(latencyMillis: 1))
        refresh()
        XCTAssertEqual(terminal.lines.filter { !$0.isEmpty }.suffix(2), ["12:00 you → bob: hello ✓✓", "bob>"])
        // News of a device with no message being sealed is a line of its own.
        session.endToEndNoticed(.peer(.newDevice(user: "bob", device: "tablet")))
        refresh()
        XCTAssertEqual(terminal.lines.filter { !$0.isEmpty }.suffix(2), ["-- bob has a new device: tablet", "bob>"])
    }
}
