import Foundation
import NIOCore
import SIMPChat
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// `simp chat` on pseudo-terminals with its own `$SIMP_HOME`: the outbox across quitting, and
/// two clients of one user side by side.
final class ChatOutboxEndToEndTests: ClientHomeTestCase {

    /// `environment(user)` without colours, for reading the screen.
    func chatEnvironment(_ user: String) async throws -> [String: String] {
        try await environment(user).merging(["NO_COLOR": "1"]) { $1 }
    }

    func chat(_ user: String, to peer: String) async throws -> PseudoTerminalProcess {
        try PseudoTerminalProcess(
            "simp", ["chat", "--server", "127.0.0.1:\(relay.port)", "--user", user, "--to", peer],
            environment: try await chatEnvironment(user), width: 100, height: 30)
    }

    /// Story 4: with the relay down, a line typed and `/quit` (twice) is not lost: the next
    /// `simp chat` resends it, the peer gets it once, and the history says delivered. It is
    /// alice's first message to bob, so she never learned his devices: it waits in her outbox
    /// until the relay can hand her bob's keys, and bob reads it decrypted.
    func testAMessagePendingAtQuitIsResentByTheNextChatAndArrivesOnce() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let bobInbox = MessageInbox(
            try await relay.connectClient(user: bob) { $0.endToEnd = EndToEndSettings(home: self.home.appendingPathComponent("bob")) })
        let first = try await chat(alice, to: bob)
        await assertScreen(first, shows: "-- connected as \(alice) (device ")

        let restart = Task { [relay = relay!] in try await relay.restart(downtime: .seconds(6)) }
        await assertScreen(first, shows: "-- connection lost; reconnecting in")
        first.type("are you there?\r")
        await assertScreen(first, shows: "you → \(bob): are you there? …")
        first.type("/quit\r")
        await assertScreen(first, shows: "-- 1 message not yet delivered; /quit again to leave, it will be sent next time")
        first.type("/quit\r")
        let firstStatus = await first.child.exitStatus()
        XCTAssertNotNil(firstStatus, first.rawOutput)
        try await restart.value

        let history = try HistoryStore(directory: home.appendingPathComponent("history"), user: alice)
        let pending = try history.load().last
        XCTAssertEqual(pending?.text, "are you there?")
        XCTAssertEqual(pending?.status, "pending")

        let second = try await chat(alice, to: bob)
        await assertScreen(second, shows: "-- 1 message from your last session is being resent")
        await assertScreen(second, shows: "you → \(bob): are you there? ✓✓")
        XCTAssertFalse(second.screen.transcript.contains { $0.contains("are you there? …") }, "its history line is not repeated")
        let arrived = await bobInbox.waitFor(1)
        XCTAssertTrue(arrived)
        _ = await Eventually.stays(for: .seconds(1)) { await bobInbox.messages.count == 1 } // quiet period: room for a duplicate
        let received = await bobInbox.messages
        XCTAssertEqual(received.map(\.content), ["are you there?"], "exactly once")
        XCTAssertEqual(received.map(\.isEndToEnd), [true])
        let entries = try history.load().filter { $0.text == "are you there?" }
        XCTAssertEqual(entries.count, 1, "one history entry, updated")
        XCTAssertEqual(entries.first?.id, pending?.id, "resent with its original id")
        XCTAssertEqual(entries.first?.status, "delivered")

        second.type("/quit\r")
        let secondStatus = await second.child.exitStatus()
        XCTAssertEqual(secondStatus, 0, second.rawOutput)
        // Shown with its true status from now on.
        let third = try await chat(alice, to: bob)
        await assertScreen(third, shows: "you → \(bob): are you there? ✓✓")
        third.type("/quit\r")
        _ = await third.child.exitStatus()
    }

    /// Story 2 (the client's side): `simp chat` and `simp listen` of one user take two devices
    /// (the default one and `-2`) and do not fight: no reconnect loop, no takeover; the relay keeps
    /// one session per device (docs/PROTOCOL.md §4.7), so both stay connected and receive.
    func testChatAndListenOfOneUserAreTwoDevicesThatDoNotFight() async throws {
        let dave = TestRelay.uniqueUser("dave"), carol = TestRelay.uniqueUser("carol")
        let chat = try await chat(dave, to: carol)
        await assertScreen(chat, shows: "-- connected as \(dave) (device ")
        let listen = try ChildProcess(
            "simp", ["listen", "--allow-plaintext", "--server", "127.0.0.1:\(relay.port)", "--user", dave],
            environment: try await chatEnvironment(dave))
        let listening = await Eventually.holds { listen.standardError.contains("listening as") }
        XCTAssertTrue(listening, listen.standardError)
        let device = try String(contentsOf: home.appendingPathComponent("device"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        await assertScreen(chat, shows: "-- connected as \(dave) (device \(device), relay")
        XCTAssertTrue(listen.standardError.contains("listening as \(dave) (device \(device)-2) on"), listen.standardError)

        // Quiet period: devices that fought would show it within a reconnect (a takeover ends the
        // older session at once, and the default backoff retries after 1 s, ± 20 %).
        _ = await Eventually.stays(for: .seconds(3)) {
            !listen.standardError.contains("reconnecting in") && !chat.screen.transcript.contains { $0.contains("took over") }
        }
        XCTAssertFalse(listen.standardError.contains("reconnecting in"), listen.standardError)
        XCTAssertFalse(listen.standardError.contains("offline"), listen.standardError)
        let chatLines = chat.screen.transcript
        XCTAssertFalse(chatLines.contains { $0.contains("reconnecting in") }, chatLines.joined(separator: "\n"))
        XCTAssertFalse(chatLines.contains { $0.contains("took over") }, chatLines.joined(separator: "\n"))

        let sender = try await relay.connectClient(user: carol)
        let result = try await sender.send(text: "to both devices", to: dave)
        // Two known devices: the relay takes custody (STORED) and hands each device its copy
        // (docs/PROTOCOL.md §4.7, §6.6).
        switch result {
        case .delivered, .stored: break
        default: XCTFail("\(result)")
        }
        await assertScreen(chat, shows: "\(carol): to both devices")
        let heard = await Eventually.holds { listen.standardOutput.contains("to both devices") }
        XCTAssertTrue(heard, listen.standardOutput)
        chat.type("/quit\r")
        let chatStatus = await chat.child.exitStatus()
        XCTAssertEqual(chatStatus, 0)
        listen.signal(SIGTERM)
        _ = await listen.exitStatus()
    }
}
