import NIOCore
import SIMPChat
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// What outlives a session: resending the outbox at start, `/quit` with messages in flight,
/// `/retry` of earlier failures, and the history's marks.
final class ChatOutboxTests: XCTestCase, ChatSessionDriving {
    var session: ChatSession!
    var terminal = VirtualTerminal(width: 100, height: 10)
    var decoder = KeyDecoder()

    @discardableResult
    func start(history: [HistoryEntry] = [], resending: [SIMPMessage] = [], interactive: Bool = true) -> [ChatEffect] {
        startSession(history: history, showingHistory: 5, resending: resending, interactive: interactive)
    }

    func entry(_ id: UInt64, _ text: String, status: String?, from: String = "alice") -> HistoryEntry {
        HistoryEntry(id: id, time: 0, from: from, to: from == "alice" ? "bob" : "alice", kind: "text", text: text, status: status)
    }

    func testMessagesLeftInTheOutboxAreResentWithTheirIdsAndRecordedOnce() {
        let left = SIMPMessage(kind: .text, messageId: 77, fromUser: "alice", toUser: "bob", content: "are you there?", time: 500)
        let effects = start(history: [entry(76, "hi", status: "delivered"), entry(77, "are you there?", status: "pending")], resending: [left])
        XCTAssertEqual(effects.count, 1)
        guard case .send(let ref, let message)? = effects.first else { return XCTFail("\(effects)") }
        XCTAssertEqual(message, left, "the original id and time")
        XCTAssertEqual(
            terminal.transcript.filter { $0.contains("are you there?") }, ["12:00 you → bob: are you there? …"],
            "shown once, live, not also as a history line")
        XCTAssertTrue(
            terminal.transcript.contains("-- 1 message from your last session is being resent"), terminal.transcript.joined(separator: "\n"))

        XCTAssertEqual(session.submitted(ref: ref, messageId: 77), [.recordStatus(messageId: 77, status: "sent")], "no second history entry")
        let done = session.resolved(ref: ref, DeliveryStatus(.delivered(messageId: 77, latency: .milliseconds(2), attempts: 1)))
        XCTAssertEqual(done, [.recordStatus(messageId: 77, status: "delivered")])
        refresh()
        XCTAssertEqual(terminal.transcript.filter { $0.contains("are you there?") }, ["12:00 you → bob: are you there? ✓✓"])
    }

    func testQuitWithUndeliveredMessagesAsksOnce() {
        start()
        guard case .send(let ref, _)? = type("one\r").first else { return XCTFail() }
        _ = type("two\r")
        _ = session.submitted(ref: ref, messageId: 1)
        XCTAssertEqual(type("/quit\r"), [])
        XCTAssertEqual(
            terminal.transcript.suffix(2),
            ["-- 2 messages not yet delivered; /quit again to leave, they will be sent next time", "bob>"])
        XCTAssertEqual(type("/quit\r"), [.quit(status: 0)])

        start()
        guard case .send(let only, _)? = type("three\r").first else { return XCTFail() }
        XCTAssertEqual(type("\u{4}"), [], "Ctrl-D asks too")
        XCTAssertEqual(
            terminal.transcript.suffix(2),
            ["-- 1 message not yet delivered; /quit again to leave, it will be sent next time", "bob>"])
        XCTAssertEqual(type("\u{3}"), [.quit(status: 0)])
        _ = only

        start()
        guard case .send(let stored, _)? = type("four\r").first else { return XCTFail() }
        _ = session.resolved(ref: stored, .stored)
        XCTAssertEqual(type("/quit\r"), [.quit(status: 0)], "stored by the relay: nothing left to lose")
    }

    func testRetryResendsFailuresOfEarlierSessionsOnce() {
        start(history: [
            entry(5, "lost one", status: "failed"), entry(6, "theirs", status: "failed", from: "bob"),
            entry(7, "fine", status: "delivered"),
        ])
        let effects = type("/retry\r")
        XCTAssertEqual(effects.first, .recordStatus(messageId: 5, status: "retried"))
        let sent = effects.compactMap { effect -> SIMPMessage? in if case .send(_, let message) = effect { return message } else { return nil } }
        XCTAssertEqual(sent.map(\.content), ["lost one"])
        XCTAssertEqual(sent.first?.messageId, 0, "a new message, with a new id")
        XCTAssertEqual(sent.first?.toUser, "bob")
        XCTAssertEqual(type("/retry\r"), [])
    }

    func testTheHistoryShowsTheTrueStatus() {
        start(history: [
            entry(1, "a", status: "pending"), entry(2, "b", status: "sent"), entry(3, "c", status: "stored"),
            entry(4, "d", status: "retried"), entry(5, "e", status: "failed"),
        ])
        XCTAssertEqual(
            Array(terminal.transcript.dropFirst().prefix(5)),
            [
                "12:00 you → bob: a …", "12:00 you → bob: b ✓", "12:00 you → bob: c ✓ (stored)",
                "12:00 you → bob: d ✗ (resent)", "12:00 you → bob: e ✗",
            ])
    }
}
