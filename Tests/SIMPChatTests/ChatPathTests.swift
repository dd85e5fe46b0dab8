import SIMPChat
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// The chat tells the user once that UDP is blocked (docs/PROTOCOL.md §5.5) and `/status`
/// shows the path.
final class ChatPathTests: XCTestCase {
    private static let clock = ChatClock(now: { 1_000 }, format: { _ in "12:00" })
    private var session: ChatSession!
    private var terminal = VirtualTerminal(width: 100, height: 8)
    private var decoder = KeyDecoder()

    private func start() {
        session = ChatSession(user: "alice", peer: "bob", screen: Screen(width: 100, height: 8, interactive: true, colors: false), clock: Self.clock)
        session.start()
        session.connectionChanged(.connected(relayId: "r1"))
        refresh()
    }

    private func type(_ text: String) {
        _ = session.handle(decoder.feed(Array(text.utf8)))
        refresh()
    }

    private func refresh() { terminal.feed(session.takeOutput()) }

    func testTheMoveToTheControlConnectionIsSaidOnceAndStatusShowsThePath() {
        start()
        type("/status\r")
        let onUDP = terminal.transcript.suffix(2)

        session.datagramPathChanged(.control)
        refresh()
        let blocked = terminal.transcript.suffix(2)
        session.datagramPathChanged(.udp)
        session.datagramPathChanged(.control)
        refresh()
        type("/status\r")

        XCTAssertEqual(onUDP, ["-- connected (relay r1); messages go over UDP", "bob>"])
        XCTAssertEqual(blocked, ["-- UDP is blocked on this network; messages go over the control connection", "bob>"])
        XCTAssertEqual(
            terminal.transcript.suffix(3),
            [
                "-- UDP is blocked on this network; messages go over the control connection",
                "-- connected (relay r1); UDP is blocked on this network; messages go over the control connection", "bob>",
            ], "said once; /status says it again")
    }

    func testStatusIsACommand() {
        XCTAssertEqual(ChatCommand.parse("/status"), .status)
        XCTAssertTrue(ChatCommand.names.contains("/status"))
    }
}
