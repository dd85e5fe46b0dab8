import NIOCore
import SIMPChat
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// Keystrokes and client events in, screen and effects out.
final class ChatSessionTests: XCTestCase, ChatSessionDriving {
    var session: ChatSession!
    var terminal = VirtualTerminal(width: 100, height: 8)
    var decoder = KeyDecoder()

    func start(interactive: Bool = true, peer: String? = nil, history: [HistoryEntry] = [], connected: Bool = true) {
        startSession(peer: peer, history: history, showingHistory: 2, interactive: interactive, connected: connected)
    }

    func testTypedMessageIsSentAndItsMarkGoesPendingSentDeliveredInPlace() {
        start()
        let effects = type("@bob hello\r")
        guard case .send(let ref, let message)? = effects.first else { return XCTFail("\(effects)") }
        XCTAssertEqual(message.toUser, "bob")
        XCTAssertEqual(message.content, "hello")
        XCTAssertEqual(message.fromUser, "alice")
        XCTAssertEqual(terminal.transcript.suffix(2), ["12:00 you → bob: hello …", "bob>"])

        XCTAssertEqual(session.submitted(ref: ref, messageId: 42).count, 1, "recorded in the history")
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(2), ["12:00 you → bob: hello ✓", "bob>"])

        _ = session.resolved(ref: ref, DeliveryStatus(.delivered(messageId: 42, latency: .milliseconds(3), attempts: 1)))
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(2), ["12:00 you → bob: hello ✓✓", "bob>"])
    }

    func testIncomingMessageDoesNotDisturbTheLineBeingTyped() {
        start(peer: "bob")
        type("half a thou\u{1B}[D")
        _ = session.receive(SIMPMessage(kind: .text, messageId: 9, fromUser: "bob", toUser: "alice", content: "you there?", time: 5).decrypted)
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(2), ["12:00 bob: you there?", "bob> half a thou"])
        XCTAssertEqual(terminal.cursorColumn, "bob> half a tho".count)
        type("\u{1B}[Fght\r")
        XCTAssertEqual(terminal.transcript.suffix(2), ["12:00 you → bob: half a thought …", "bob>"])
    }

    func testIncomingImageIsALinkLine() {
        start()
        var image = SIMPMessage(kind: .image, messageId: 3, fromUser: "bob", toUser: "alice", time: 5)
        image.imageURL = "https://example.com/cat.png"
        image.imageScale = 0.5
        _ = session.receive(image.decrypted)
        refresh()
        XCTAssertEqual(
            terminal.transcript.suffix(3),
            ["12:00 bob: [image] https://example.com/cat.png (scale 0.5)", "-- replies go to bob (/to NAME to talk to someone else)", "bob>"])
    }

    func testImageCommandSendsAnImageMessage() {
        start(peer: "bob")
        guard case .send(_, let message)? = type("/image https://x.org/a.png 2\r").first else { return XCTFail() }
        XCTAssertEqual(message.kind, .image)
        XCTAssertEqual(message.imageURL, "https://x.org/a.png")
        XCTAssertEqual(message.imageScale, 2)
    }

    func testFailureShowsTheReasonAndRetryResendsOnce() {
        start(peer: "bob")
        guard case .send(let ref, _)? = type("are you on?\r").first else { return XCTFail() }
        _ = session.submitted(ref: ref, messageId: 7)
        _ = session.resolved(ref: ref, DeliveryStatus(.failed(messageId: 7, .rejected(.unknownRecipient, "no user \"bob\" is registered"))))
        refresh()
        XCTAssertEqual(
            terminal.transcript.suffix(2),
            ["12:00 you → bob: are you on? ✗ no user \"bob\" is registered (/retry resends)", "bob>"])

        let retried = type("/retry\r")
        XCTAssertEqual(retried.count, 2)
        XCTAssertEqual(retried.first, .recordStatus(messageId: 7, status: "retried"), "offered once, across restarts too")
        guard case .send(_, let message)? = retried.last else { return XCTFail() }
        XCTAssertEqual(message.content, "are you on?")
        XCTAssertTrue(type("/retry\r").isEmpty, "already resent")
        XCTAssertEqual(terminal.transcript.suffix(2), ["-- nothing to retry: no message failed", "bob>"])
    }

    func testOutcomeOfALineScrolledOffScreenIsAFollowUpLine() {
        start(peer: "bob")
        guard case .send(let ref, _)? = type("first\r").first else { return XCTFail() }
        for number in 1...10 {
            _ = session.receive(SIMPMessage(kind: .text, messageId: UInt64(number), fromUser: "bob", toUser: "alice", content: "\(number)"))
        }
        _ = session.resolved(ref: ref, DeliveryStatus(.delivered(messageId: 1, latency: .microseconds(1500), attempts: 1)))
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(2), ["✓✓ delivered to bob: \"first\" (1.5 ms)", "bob>"])
    }

    func testConnectionStatesAppearAsNoticesAndInThePrompt() {
        start(peer: "bob", connected: false)
        XCTAssertEqual(terminal.cursorLine, "[connecting] bob>")
        session.connectionChanged(.connected(relayId: "r1"))
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(2), ["-- connected as alice (relay r1)", "bob>"])
        session.connectionChanged(.reconnecting(attempt: 3, delay: .seconds(4)))
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(2), ["-- relay still unreachable; reconnecting in 4 s (attempt 3)", "[reconnecting] bob>"])
        session.connectionChanged(.connected(relayId: "r2"))
        session.connectionChanged(.offline(reason: "closed"))
        refresh()
        XCTAssertEqual(
            terminal.transcript.suffix(4),
            [
                "-- reconnected (relay r2)", "-- offline: closed",
                "-- messages you type wait in the outbox; /reconnect tries again (or start simp again later)", "[offline] bob>",
            ])
    }

    func testMessageTypedWhileReconnectingStaysPendingUntilTheRelayIsBack() {
        start(peer: "bob")
        session.connectionChanged(.reconnecting(attempt: 1, delay: .seconds(1)))
        guard case .send(let ref, _)? = type("still there?\r").first else { return XCTFail() }
        _ = session.submitted(ref: ref, messageId: 8)
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(2), ["12:00 you → bob: still there? …", "[reconnecting] bob>"])
        session.connectionChanged(.connected(relayId: "r2"))
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(3), ["12:00 you → bob: still there? ✓", "-- reconnected (relay r2)", "bob>"])
    }

    func testMistakesAndHelpAreShownNotSent() {
        start()
        XCTAssertTrue(type("hello\r").isEmpty)
        XCTAssertEqual(terminal.transcript.suffix(2), ["-- no one to send to: type @NAME TEXT, or /to NAME first", ">"])
        XCTAssertTrue(type("/nope\r").isEmpty)
        XCTAssertTrue(terminal.transcript.suffix(2).first?.hasPrefix("-- unknown command /nope") ?? false)
        type("/help\r")
        XCTAssertTrue(terminal.transcript.contains(ChatCommand.helpLines[0]))
    }

    func testQuitByCommandCtrlDAndCtrlC() {
        start()
        XCTAssertEqual(type("/quit\r"), [.quit(status: 0)])
        start()
        XCTAssertEqual(type("\u{4}"), [.quit(status: 0)])
        start()
        XCTAssertEqual(type("x\u{3}"), [], "Ctrl-C clears a line first")
        XCTAssertEqual(type("\u{3}"), [.quit(status: 0)])
    }

    func testHistoryIsShownOnStartAndPagedBack() {
        let history = (1...5).map { (number: Int) -> HistoryEntry in
            let mine = number % 2 == 0
            return HistoryEntry(
                id: UInt64(number), time: 0, from: mine ? "alice" : "bob", to: mine ? "bob" : "alice",
                kind: "text", text: "old \(number)", status: mine ? "delivered" : nil)
        }
        start(history: history)
        XCTAssertEqual(
            Array(terminal.transcript.prefix(3)),
            ["-- last 2 of 5 messages; /history shows older ones", "12:00 you → bob: old 4 ✓✓", "12:00 bob: old 5"])
        // Older messages go above what is shown, in time order.
        type("/history 2\r")
        XCTAssertEqual(
            Array(terminal.lines.prefix(5)),
            [
                "12:00 you → bob: old 2 ✓✓", "12:00 bob: old 3", "-- last 2 of 5 messages; /history shows older ones",
                "12:00 you → bob: old 4 ✓✓", "12:00 bob: old 5",
            ])
        type("/history\r")
        XCTAssertEqual(Array(terminal.lines.prefix(3)), ["12:00 bob: old 1", "12:00 you → bob: old 2 ✓✓", "12:00 bob: old 3"])
        XCTAssertTrue(terminal.cursorLine.hasPrefix("[1 more ↓]"), "the view is scrolled back: \(terminal.cursorLine)")
        type("/history\r")
        XCTAssertEqual(terminal.lines.suffix(2), ["-- no older messages", ">"], "typing returns to the newest lines")
    }

    func testPlainModePrintsLinesAndWaitsForOutcomesAtEndOfInput() {
        start(interactive: false, peer: "bob", history: [HistoryEntry(id: 1, time: 0, from: "bob", to: "alice", kind: "text", text: "old")])
        XCTAssertEqual(terminal.transcript, ["-- connected as alice (relay r1)"], "no history, prompt or colours in plain mode")
        guard case .send(let ref, _)? = session.submitLine("hi").first else { return XCTFail() }
        XCTAssertEqual(session.endOfInput(), [.startDrainTimer])
        _ = session.submitted(ref: ref, messageId: 5)
        refresh()
        XCTAssertEqual(terminal.transcript.last, "12:00 you → bob: hi ✓")
        let effects = session.resolved(ref: ref, DeliveryStatus(.delivered(messageId: 5, latency: .milliseconds(2), attempts: 1)))
        XCTAssertEqual(effects.last, .quit(status: 0))
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(2), ["12:00 you → bob: hi ✓", "✓✓ delivered to bob: \"hi\" (2.0 ms)"])
        XCTAssertFalse(terminal.transcript.joined().contains("\u{1B}"))
    }

    func testPlainModeExitsOneWhenAMessageIsStillUnresolvedAfterTheTimeout() {
        start(interactive: false, peer: "bob")
        _ = session.submitLine("hi")
        XCTAssertEqual(session.endOfInput(), [.startDrainTimer])
        XCTAssertEqual(session.drainTimedOut(), [.quit(status: 1)])
        refresh()
        XCTAssertEqual(terminal.transcript.last, "-- gave up waiting for the outcome of 1 message(s)")
    }
}
