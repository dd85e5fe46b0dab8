import NIOConcurrencyHelpers
import SIMPChat
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// What the screen claims must be true: a typing indicator goes away when it expires, and a
/// message is marked read only once its line is on screen.
final class ChatScreenTruthTests: XCTestCase, ChatSessionDriving {
    private let now = NIOLockedValueBox<Int64>(1_000)
    var session: ChatSession!
    var terminal = VirtualTerminal(width: 60, height: 6)
    var decoder = KeyDecoder()
    /// The time moves when a test says (`now`).
    var clock: ChatClock { ChatClock(now: { [now = self.now] in now.withLockedValue { $0 } }, format: { _ in "12:00" }) }

    override func setUp() {
        startSession()
    }

    private func fromBob(_ id: UInt64, _ text: String) -> SIMPMessage {
        SIMPMessage(kind: .text, messageId: id, fromUser: "bob", toUser: "alice", content: text, time: 1)
    }

    func testTypingIndicatorLeavesThePromptWhenItsWindowEndsWithoutAKey() {
        let effects = session.peerEvent(.typing(from: "bob"))
        refresh()
        XCTAssertEqual(terminal.cursorLine, "bob (typing…)>")
        XCTAssertEqual(effects, [.wake(afterMillis: ChatSession.typingWindow)], "the controller is asked to come back")

        now.withLockedValue { $0 += ChatSession.typingWindow - 1 }
        session.clockTicked()
        refresh()
        XCTAssertEqual(terminal.cursorLine, "bob (typing…)>", "still inside the window")
        now.withLockedValue { $0 += 1 }
        session.clockTicked()
        refresh()
        XCTAssertEqual(terminal.cursorLine, "bob>", "expired, redrawn without a key press")
    }

    func testAMessageArrivingWhileScrolledBackIsMarkedReadOnlyWhenTheViewReturnsToIt() {
        for id in 1...12 { _ = session.receive(fromBob(UInt64(id), "line \(id)")) }
        type("\u{1B}[5~") // PageUp
        XCTAssertTrue(terminal.cursorLine.contains("more ↓"), terminal.cursorLine)

        XCTAssertEqual(session.receive(fromBob(20, "while you read old lines")), [], "not on screen: not read")
        refresh()
        XCTAssertFalse(terminal.lines.contains { $0.contains("while you read old lines") }, "\(terminal.lines)")

        var effects: [ChatEffect] = []
        for _ in 0..<5 where !terminal.lines.contains(where: { $0.contains("while you read old lines") }) {
            effects += type("\u{1B}[6~") // PageDown until the newest lines show
        }
        XCTAssertTrue(terminal.lines.contains { $0.contains("while you read old lines") }, "\(terminal.lines)")
        XCTAssertEqual(effects, [.markRead(from: "bob", upTo: 20)], "read once it is on screen")
        XCTAssertEqual(session.receive(fromBob(21, "next")), [.markRead(from: "bob", upTo: 21)], "following again: read at once")
    }
}
