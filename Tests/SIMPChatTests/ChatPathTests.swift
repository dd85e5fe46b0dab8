import SIMPChat
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// The chat tells the user once that UDP is blocked (docs/PROTOCOL.md §5.5) and `/status`
/// shows the path.
final class ChatPathTests: XCTestCase, ChatSessionDriving {
    var session: ChatSession!
    var terminal = VirtualTerminal(width: 100, height: 8)
    var decoder = KeyDecoder()

    func testTheMoveToTheControlConnectionIsSaidOnceAndStatusShowsThePath() {
        startSession()
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
