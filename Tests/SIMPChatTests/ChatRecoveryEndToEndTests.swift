import Foundation
import SIMPChat
import SIMPTestSupport
import XCTest

/// A device's end-to-end state restored from a backup, as two `simp chat`s on terminals see it.
final class ChatRecoveryEndToEndTests: ClientHomeTestCase {
    func chat(_ user: String, to peer: String) async throws -> PseudoTerminalProcess {
        try PseudoTerminalProcess(
            "simp", ["chat", "--server", "127.0.0.1:\(relay.port)", "--user", user, "--to", peer],
            environment: try await environment(user).merging(["NO_COLOR": "1"]) { $1 }, width: 100, height: 30)
    }

    func quit(_ terminal: PseudoTerminalProcess) async {
        terminal.type("/quit\r")
        _ = await terminal.child.exitStatus()
    }

    /// bob's state goes back to a copy: alice's next message cannot be decrypted by him, is
    /// asked for and sent again. Each side says so in one line without message ids, and the
    /// request to send it again is neither shown nor kept as a message of bob's.
    func testAMessageSentAgainAfterARestoredStateIsOneLineOnEachSide() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let aliceTerminal = try await chat(alice, to: bob)
        var bobTerminal = try await chat(bob, to: alice)
        await assertScreen(aliceTerminal, shows: "-- connected as \(alice)")
        await assertScreen(bobTerminal, shows: "-- connected as \(bob)")
        aliceTerminal.type("one\r")
        await assertScreen(bobTerminal, shows: "\(alice): one")
        bobTerminal.type("two\r")
        await assertScreen(aliceTerminal, shows: "\(bob): two")
        await quit(bobTerminal)

        let state = home.appendingPathComponent("e2e").appendingPathComponent(bob)
        let backup = home.appendingPathComponent("e2e-backup")
        try FileManager.default.copyItem(at: state, to: backup)
        bobTerminal = try await chat(bob, to: alice)
        await assertScreen(bobTerminal, shows: "-- connected as \(bob)")
        aliceTerminal.type("three\r")
        await assertScreen(bobTerminal, shows: "\(alice): three")
        bobTerminal.type("four\r")
        await assertScreen(aliceTerminal, shows: "\(bob): four")
        await quit(bobTerminal)

        try FileManager.default.removeItem(at: state)
        try FileManager.default.moveItem(at: backup, to: state)
        bobTerminal = try await chat(bob, to: alice)
        await assertScreen(bobTerminal, shows: "-- connected as \(bob)")
        aliceTerminal.type("five\r")
        await assertScreen(bobTerminal, shows: "\(alice): five")
        await assertScreen(bobTerminal, shows: "-- 1 message from \(alice) (device ")
        await assertScreen(aliceTerminal, shows: "'s device ")
        await assertScreen(aliceTerminal, shows: "started a new session; 1 message was sent again")
        for terminal in [aliceTerminal, bobTerminal] {
            let lines = terminal.screen.transcript
            XCTAssertFalse(lines.contains { $0.contains("message 1") || $0.range(of: "[0-9]{12}", options: .regularExpression) != nil }, "\(lines)")
            XCTAssertFalse(lines.contains { $0.hasSuffix(": ✓") || $0.hasSuffix(":  ✓") || $0.hasSuffix(": ✓✓") }, "no blank message: \(lines)")
            XCTAssertFalse(lines.contains { $0.contains("from your last session") }, "\(lines)")
        }
        await quit(aliceTerminal)
        await quit(bobTerminal)
        let bobHistory = try HistoryStore(directory: home.appendingPathComponent("history"), user: bob).load()
        XCTAssertFalse(bobHistory.contains { $0.from == bob && $0.text.isEmpty }, "no empty message kept: \(bobHistory)")
    }
}
