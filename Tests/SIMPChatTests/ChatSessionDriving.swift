import SIMPChat
import SIMPCore
import SIMPTestSupport

/// A test that drives alice's `ChatSession` as `ChatController` does: keystrokes through a
/// `KeyDecoder`, the session's output into a `VirtualTerminal` the test reads, at 12:00 always
/// (unless the test brings its own `clock`). The conforming test case keeps the three pieces;
/// the steps are shared here.
protocol ChatSessionDriving: AnyObject {
    var session: ChatSession! { get set }
    var terminal: VirtualTerminal { get set }
    var decoder: KeyDecoder { get set }
    /// The session's clock: by default every message's time reads 12:00, at time 1,000.
    var clock: ChatClock { get }
}

extension ChatSessionDriving {
    var clock: ChatClock { ChatClock(now: { 1_000 }, format: { _ in "12:00" }) }

    /// A new session for alice (talking to `peer`) on a screen of the terminal's size, started
    /// with the last `showingHistory` entries of `history` shown and `resending` resent, and
    /// connected unless `connected` is false; the terminal shows its output. Returns the
    /// start's effects.
    @discardableResult
    func startSession(
        peer: String? = "bob", history: [HistoryEntry] = [], showingHistory: Int = 10, resending: [SIMPMessage] = [],
        interactive: Bool = true, connected: Bool = true
    ) -> [ChatEffect] {
        session = ChatSession(
            user: "alice", peer: peer,
            screen: Screen(width: terminal.width, height: terminal.height, interactive: interactive, colors: false),
            history: history, clock: clock)
        let effects = session.start(showingHistory: showingHistory, resending: resending)
        if connected { session.connectionChanged(.connected(relayId: "r1")) }
        refresh()
        return effects
    }

    /// Types `text` (keys as a terminal sends them); returns the session's effects.
    @discardableResult
    func type(_ text: String) -> [ChatEffect] {
        defer { refresh() }
        return session.handle(decoder.feed(Array(text.utf8)))
    }

    /// Shows on the terminal what the session has written since the last time.
    func refresh() { terminal.feed(session.takeOutput()) }
}
