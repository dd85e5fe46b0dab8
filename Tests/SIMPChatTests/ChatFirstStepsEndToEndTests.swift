import Foundation
import SIMPChat
import SIMPClient
import SIMPTestSupport
import XCTest

/// What people meet first in `simp chat`, with real processes on terminals, a real relay and
/// Redis: a reply with no one chosen, irssi's habits, who comes and goes in a room, and a
/// locked account.
extension ChatEndToEndTests {
    /// `simp chat` for `user` without `--to`.
    func chatWithNoOneChosen(_ user: String) async throws -> PseudoTerminalProcess {
        var environment = ["NO_COLOR": "1"]
        environment.merge(try await credentials(user)) { $1 }
        return try PseudoTerminalProcess(
            "simp", ["chat", "--server", "127.0.0.1:\(relay.port)", "--user", user, "--history-dir", historyDirectory.path],
            environment: environment, width: 100, height: 30)
    }

    func quit(_ terminal: PseudoTerminalProcess) async {
        terminal.type("/quit\r")
        _ = await terminal.child.exitStatus()
    }

    func testAReplyGoesToWhoeverWroteAndARoomSaysWhoComesAndGoes() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let room = "room-\(UInt32.random(in: 0 ... .max))"
        let bobFirst = try await chatWithNoOneChosen(bob)
        let aliceTerminal = try await chat(alice, to: bob)
        await assertScreen(bobFirst, shows: "-- connected as \(bob)")
        await assertScreen(aliceTerminal, shows: "-- connected as \(alice)")

        // bob never chose anyone: alice's message makes her the one he replies to, and it is
        // read at once (it is on his screen, in the conversation he is in).
        aliceTerminal.type("are you there?\r")
        await assertScreen(bobFirst, shows: "-- replies go to \(alice)")
        await assertScreen(aliceTerminal, shows: "you → \(bob): are you there? ✓✓ read")
        bobFirst.type("yes\r")
        await assertScreen(aliceTerminal, shows: "\(bob): yes")
        bobFirst.type("/me waves\r")
        await assertScreen(aliceTerminal, shows: "* \(bob) waves")
        await quit(bobFirst)

        // The next chat starts where this one ended.
        let bobTerminal = try await chatWithNoOneChosen(bob)
        await assertScreen(bobTerminal, shows: "talking to \(alice) (as when you left")
        bobTerminal.type("/msg \(alice) back again\r")
        await assertScreen(aliceTerminal, shows: "\(bob): back again")

        // Alone in a room, a post is not "stored" for anyone; bob's coming and going is said.
        aliceTerminal.type("/join \(room)\r")
        await assertScreen(aliceTerminal, shows: "joined #\(room) (\(alice))")
        aliceTerminal.type("anyone?\r")
        await assertScreen(aliceTerminal, shows: "you → #\(room): anyone? ✓ (no other members)")
        bobTerminal.type("/join \(room)\r")
        await assertScreen(bobTerminal, shows: "joined #\(room)")
        bobTerminal.type("hi room\r")
        await assertScreen(aliceTerminal, shows: "-- \(bob) joined #\(room)")
        await assertScreen(aliceTerminal, shows: "#\(room) \(bob): hi room")
        bobTerminal.type("/part\r")
        await assertScreen(bobTerminal, shows: "-- left #\(room)")
        aliceTerminal.type("gone?\r")
        await assertScreen(aliceTerminal, shows: "-- \(bob) left #\(room)")
        await assertScreen(aliceTerminal, shows: "you → #\(room): gone? ✓ (no other members)")

        await quit(aliceTerminal)
        await quit(bobTerminal)
    }

    /// An operator locks dave and ends his session: his chat says the account is locked, does
    /// not pretend to retry, keeps what he types in the outbox, and `/reconnect` (after the
    /// unlock) sends it; the history says it was delivered.
    func testALockedUserIsToldSoAndReconnectsWhenUnlocked() async throws {
        let dave = TestRelay.uniqueUser("dave"), erin = TestRelay.uniqueUser("erin")
        let daveTerminal = try await chat(dave, to: erin)
        let erinTerminal = try await chat(erin, to: dave)
        await assertScreen(daveTerminal, shows: "-- connected as \(dave)")
        await assertScreen(erinTerminal, shows: "-- connected as \(erin)")

        try await operatorCommand(["user", "lock", dave])
        try await operatorCommand(["sessions", "end", dave])
        await assertScreen(daveTerminal, shows: "-- offline: login refused: your account is locked by the relay's operator; not reconnecting")
        await assertScreen(daveTerminal, shows: "-- messages you type wait in the outbox; /reconnect tries again")
        daveTerminal.type("still here\r")
        await assertScreen(daveTerminal, shows: "-- not connected: it waits in the outbox; /reconnect tries again")
        daveTerminal.type("/status\r")
        await assertScreen(daveTerminal, shows: "message not yet delivered; messages you type wait in the outbox")
        XCTAssertFalse(daveTerminal.rawOutput.contains("over UDP"), "no path is in use while stopped")
        XCTAssertFalse(daveTerminal.rawOutput.contains("unknown user or wrong password"))

        // Too early: still locked, refused again; what was typed is still kept for later.
        daveTerminal.type("/reconnect\r")
        let refusedAgain = await daveTerminal.waitForScreen {
            // The refusal's own line, twice; /status's line starts the same way and is not one.
            $0.transcript.filter { $0 == "-- offline: login refused: your account is locked by the relay's operator; not reconnecting" }.count == 2
        }
        XCTAssertTrue(refusedAgain, daveTerminal.screen.transcript.joined(separator: "\n"))

        try await operatorCommand(["user", "unlock", dave])
        daveTerminal.type("/reconnect\r")
        await assertScreen(daveTerminal, shows: "-- reconnected")
        await assertScreen(erinTerminal, shows: "\(dave): still here")
        await assertScreen(daveTerminal, shows: "you → \(erin): still here ✓✓")
        XCTAssertFalse(daveTerminal.rawOutput.contains("still trying"), "nothing said it was retrying while it was not")
        await quit(daveTerminal)
        await quit(erinTerminal)
        let kept = try HistoryStore(directory: historyDirectory, user: dave).load().last { $0.text == "still here" }
        XCTAssertTrue(kept?.status == "delivered" || kept?.status == "read", "\(String(describing: kept))")
    }

    /// Runs `simp-server ARGUMENTS` against the test relay's Redis; fails the test unless it exits 0.
    private func operatorCommand(_ arguments: [String]) async throws {
        let process = try ChildProcess("simp-server", arguments, environment: ["SIMP_REDIS": relay.redis.url.description])
        let status = await process.exitStatus()
        XCTAssertEqual(status, 0, "simp-server \(arguments.joined(separator: " ")): \(process.standardError)")
    }
}
