import NIOCore
import SIMPChat
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// The client stopped for good (the relay refused the login: a locked user): the chat says
/// what is true, keeps messages in the outbox, and offers `/reconnect`.
extension ChatSessionTests {
    func testAStoppedClientIsNotSaidToBeTryingAndOffersReconnect() {
        start(peer: "bob")
        guard case .send(let before, _)? = type("first\r").first else { return XCTFail("not sent") }
        _ = session.submitted(ref: before, messageId: 41)
        session.connectionChanged(.offline(reason: "login refused: your account is locked by the relay's operator; not reconnecting"))
        refresh()
        XCTAssertEqual(
            terminal.transcript.suffix(4),
            [
                "12:00 you → bob: first …",
                "-- offline: login refused: your account is locked by the relay's operator; not reconnecting",
                "-- messages you type wait in the outbox; /reconnect tries again (or start simp again later)", "[offline] bob>",
            ], "nothing retransmits it now: pending, not sent")

        guard case .send(let ref, _)? = type("hello?\r").first else { return XCTFail("not kept") }
        _ = session.submitted(ref: ref, messageId: 42)
        XCTAssertEqual(session.noticed(.delayed(messageId: 42, to: "bob", waitedMillis: 5000)), [])
        refresh()
        XCTAssertEqual(
            terminal.transcript.suffix(3),
            ["12:00 you → bob: hello? …", "-- not connected: it waits in the outbox; /reconnect tries again", "[offline] bob>"])

        type("/status\r")
        let lines = terminal.transcript.dropLast() // the prompt
        let status = lines.suffix(from: lines.lastIndex { $0.hasPrefix("-- offline") }!).joined(separator: " ")
        XCTAssertEqual(
            status,
            "-- offline: login refused: your account is locked by the relay's operator; not reconnecting; 2 messages not yet delivered;"
                + " messages you type wait in the outbox; /reconnect tries again (or start simp again later)")
        XCTAssertFalse(status.contains("UDP"), "no path is in use")

        XCTAssertEqual(type("/reconnect\r"), [.reconnect])
        session.connectionChanged(.connecting)
        XCTAssertEqual(type("/reconnect\r"), [], "not stopped: it is connecting already")
        session.connectionChanged(.connected(relayId: "r1"))
        XCTAssertEqual(session.outgoing[before].status, .sent, "sent again once registered")
        // The message given up when the client stopped is delivered after all (the client
        // says so in a notice): its mark and its history record follow.
        let effects = session.noticed(.delivered(messageId: 41, to: ""))
        XCTAssertEqual(effects, [.recordStatus(messageId: 41, status: "delivered")])
        guard case .delivered = session.outgoing[before].status else { return XCTFail("\(session.outgoing[before].status)") }
    }

    /// The relay stored a message whose outcome was given up when the client stopped: the
    /// notice settles it (the send outcome no longer will).
    func testAStoredNoticeSettlesAMessageWhoseOutcomeWasGivenUp() {
        start(peer: "bob")
        guard case .send(let ref, _)? = type("first\r").first else { return XCTFail("not sent") }
        _ = session.submitted(ref: ref, messageId: 41)
        XCTAssertEqual(session.noticed(.stored(messageId: 41, to: "bob")), [.recordStatus(messageId: 41, status: "stored")])
        XCTAssertEqual(session.noticed(.stored(messageId: 41, to: "bob")), [], "settled already: the outcome said it")
    }
}
