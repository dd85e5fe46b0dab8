import Foundation
import SIMPChat
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// Checking who one talks to in `simp chat`: `/verify`, a peer's new or changed devices, and
/// received lines that did not come end-to-end encrypted.
final class ChatVerifyTests: XCTestCase, ChatSessionDriving {
    var session: ChatSession!
    var terminal = VirtualTerminal(width: 100, height: 12)
    var decoder = KeyDecoder()

    func start(peer: String? = "bob", history: [HistoryEntry] = []) {
        startSession(peer: peer, history: history, showingHistory: 5)
    }

    func testVerifyIsParsedListedInHelpAndCompleted() {
        XCTAssertEqual(ChatCommand.parse("/verify bob"), .verify("bob"))
        XCTAssertEqual(ChatCommand.parse("/VERIFY"), .verify(nil))
        XCTAssertEqual(ChatCommand.parse("/verify bob carol"), .invalid("usage: /verify [NAME] [--confirm | --accept]"))
        XCTAssertEqual(ChatCommand.parse("/verify bob --accept"), .acceptKeyChange("bob"))
        XCTAssertEqual(ChatCommand.parse("/verify bob --accept --confirm"), .invalid("usage: /verify [NAME] [--confirm | --accept]"))
        XCTAssertEqual(ChatCommand.parse("/verify bob --confirm"), .confirmVerified("bob"))
        XCTAssertEqual(ChatCommand.parse("/verify --confirm"), .confirmVerified(nil))
        XCTAssertTrue(ChatCommand.names.contains("/verify"))
        XCTAssertTrue(ChatCommand.helpLines.contains { $0.hasPrefix("/verify [NAME]") })
        XCTAssertTrue(ChatCommand.helpLines.allSatisfy { $0.count <= 80 })
    }

    func testVerifyAsksForTheNamedPeerOrTheCurrentOneButNotARoom() {
        start()
        XCTAssertEqual(type("/verify carol\r"), [.safetyNumbers(with: "carol")])
        XCTAssertEqual(type("/verify\r"), [.safetyNumbers(with: "bob")])
        XCTAssertEqual(type("/verify #lobby\r"), [])
        XCTAssertEqual(terminal.transcript.suffix(2), ["-- usage: /verify NAME (a person; default: the current peer)", "bob>"])
    }

    func testSafetyNumbersAreShownPerDeviceWithHowToCompareThem() {
        start()
        let number = (0..<12).map { String(format: "%05d", $0 * 7919 % 100_000) }.joined(separator: " ")
        session.safetyNumbersAnswered(with: "bob", .success([(device: "laptop-3fa2", number: number)]))
        refresh()
        XCTAssertEqual(
            terminal.transcript.suffix(4),
            [
                "-- safety number with bob's device laptop-3fa2:", "   " + number,
                "-- bob sees the same with /verify alice: compare in person or on a call", "bob>",
            ])
    }

    /// `/verify NAME --confirm` marks NAME verified; when a key of NAME changes later, the
    /// conversation says so and NAME's lines are marked until NAME is confirmed again.
    func testAVerifiedPeerWhoseKeyChangedIsMarkedUntilConfirmedAgain() {
        start()
        XCTAssertEqual(type("/verify --confirm\r"), [.confirmVerified("bob")])
        XCTAssertEqual(type("/verify #lobby --confirm\r"), [])
        session.verifiedConfirmed("bob", .success(2))
        session.verifiedConfirmed("zed", .success(0))
        session.endToEndNoticed(.verifiedKeyChanged(user: "bob"))
        _ = session.receive(SIMPMessage(kind: .text, messageId: 1, fromUser: "bob", toUser: "alice", content: "trust me", time: 5).decrypted)
        _ = session.receive(SIMPMessage(kind: .text, messageId: 2, fromUser: "carol", toUser: "alice", content: "hi", time: 5).decrypted)
        session.verifiedConfirmed("bob", .success(2))
        _ = session.receive(SIMPMessage(kind: .text, messageId: 3, fromUser: "bob", toUser: "alice", content: "again", time: 6).decrypted)
        refresh()
        XCTAssertEqual(
            terminal.transcript.suffix(9),
            [
                "-- usage: /verify NAME --confirm (a person; default: the current peer)",
                "-- bob is verified (2 devices); you are told if a key changes",
                "-- /verify zed --confirm: no keys of zed known yet; /verify zed first",
                "-- bob is no longer verified: a key changed (/verify bob, then /verify bob --confirm)",
                "12:00 bob: trust me (key changed, not verified)", "12:00 carol: hi",
                "-- bob is verified (2 devices); you are told if a key changes",
                "12:00 bob: again", "[carol 1] bob>",
            ])
        var entry = HistoryEntry(received: SIMPMessage(kind: .text, messageId: 1, fromUser: "bob", toUser: "alice", content: "trust me"))
        entry.keyChanged = true
        let reloaded = try? JSONDecoder().decode(HistoryEntry.self, from: JSONEncoder().encode(entry))
        XCTAssertEqual(reloaded?.keyChanged, true, "the mark is kept in the history file")
    }

    func testVerifyWithoutKeysOrWithAnErrorSaysSo() {
        start()
        session.safetyNumbersAnswered(with: "bob", .success([]))
        session.safetyNumbersAnswered(with: "zed", .failure(ChatRoomError("not connected")))
        refresh()
        XCTAssertEqual(
            terminal.transcript.suffix(3),
            [
                "-- /verify bob: bob has published no end-to-end keys yet; messages to bob wait for them",
                "-- /verify zed: not connected", "bob>",
            ])
    }

    func testEndToEndNoticesAreShortLinesInTheConversation() {
        start()
        session.endToEndNoticed(.peer(.newDevice(user: "bob", device: "laptop-3fa2")))
        session.endToEndNoticed(.peer(.deviceKeyChanged(user: "bob", device: "laptop-3fa2")))
        session.endToEndNoticed(.peer(.sessionRestarted(user: "bob", device: "phone-77ab")))
        session.endToEndNoticed(.undecryptable(user: "bob", messageId: 7, reason: "bad tag"))
        refresh()
        XCTAssertEqual(
            terminal.transcript.suffix(5),
            [
                "-- bob has a new device: laptop-3fa2",
                "-- bob's key changed (device laptop-3fa2): /verify bob",
                "-- bob's device phone-77ab started a new session (its state was lost or restored)",
                "-- a message from bob could not be decrypted: bad tag", "bob>",
            ])
    }

    func testAMessageAskedForAgainIsToldToBothUsers() {
        start()
        session.endToEndNoticed(.askedAgain(user: "bob", device: "phone", messageId: 7))
        session.endToEndNoticed(.resent(user: "bob", device: "phone", messageId: 8, again: true))
        session.endToEndNoticed(.resent(user: "bob", device: "phone", messageId: 9, again: false))
        session.endToEndNoticed(.restoredSessionReplaced(user: "bob", device: "phone"))
        refresh()
        XCTAssertEqual(
            terminal.transcript.suffix(5),
            [
                "-- 1 message from bob (device phone) could not be decrypted here; asked for it again",
                "-- bob's device phone started a new session; 1 message was sent again",
                "-- bob's device phone could not read 1 message from you, no longer kept here to send again",
                "-- this device's session with bob (phone) was restored from a backup; a new one was started", "bob>",
            ])
    }

    func testAReceivedDirectMessageThatCameUnencryptedIsMarkedAndSoIsItsHistory() {
        start()
        let encrypted = SIMPMessage(kind: .text, messageId: 1, fromUser: "bob", toUser: "alice", content: "sealed", time: 5).decrypted
        _ = session.receive(encrypted)
        _ = session.receive(SIMPMessage(kind: .text, messageId: 2, fromUser: "bob", toUser: "alice", content: "plain", time: 6))
        var roomPost = SIMPMessage(kind: .text, messageId: 3, fromUser: "#lobby", toUser: "alice", content: "hi all", time: 7)
        roomPost.author = "carol"
        _ = session.receive(roomPost.decrypted)
        roomPost.messageId = 4
        roomPost.content = "plain post"
        _ = session.receive(roomPost)
        refresh()
        XCTAssertEqual(
            terminal.transcript.suffix(5),
            [
                "12:00 bob: sealed", "12:00 bob: plain (not encrypted)", "12:00 #lobby carol: hi all",
                "12:00 #lobby carol: plain post (not encrypted)", "[#lobby 2] bob>",
            ])

        let plain = HistoryEntry(received: SIMPMessage(kind: .text, messageId: 2, fromUser: "bob", toUser: "alice", content: "plain"))
        XCTAssertEqual(plain.unencrypted, true)
        XCTAssertNil(HistoryEntry(received: encrypted).unencrypted)
        let reloaded = try? JSONDecoder().decode(HistoryEntry.self, from: JSONEncoder().encode(plain))
        XCTAssertEqual(reloaded, plain, "the mark is kept in the history file")
        start(history: [plain])
        XCTAssertTrue(terminal.transcript.contains("12:00 bob: plain (not encrypted)"), "\(terminal.transcript)")
    }

    /// `/verify NAME --accept` takes NAME's changed key without comparing: the line says NAME is
    /// no longer verified and messages go again, and NAME's lines are no longer marked.
    func testAcceptingAChangedKeySaysSoAndUnmarksThePeer() {
        start()
        XCTAssertEqual(type("/verify --accept\r"), [.acceptKeyChange("bob")])
        session.endToEndNoticed(.verifiedKeyChanged(user: "bob"))
        session.keyChangeAccepted("bob", .success(true))
        _ = session.receive(SIMPMessage(kind: .text, messageId: 1, fromUser: "bob", toUser: "alice", content: "hi", time: 5).decrypted)
        refresh()
        XCTAssertTrue(
            terminal.transcript.contains { $0.hasPrefix("-- bob's new keys are accepted; bob is no longer verified") }, "\(terminal.transcript)")
        XCTAssertTrue(terminal.transcript.contains("12:00 bob: hi"), "not marked once accepted: \(terminal.transcript)")
    }
}

extension SIMPMessage {
    /// This message as the client hands over one that came end-to-end encrypted: decrypted,
    /// with its `e2ePayload` kept (the content here stands for what was decrypted).
    var decrypted: SIMPMessage {
        var message = self
        message.e2ePayload = [1]
        return message
    }
}
