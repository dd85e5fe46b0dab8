import Foundation
import SIMPChat
import SIMPClient
import SIMPTestSupport
import XCTest

/// A long conversation between two real `simp chat` processes on 80×24 terminals: read
/// receipts stay quiet, and the irssi habits work.
extension ChatEndToEndTests {
    func testALongConversationStaysReadableAndTheHabitsWork() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob"), carol = TestRelay.uniqueUser("carol")
        let aliceTerminal = try await chat(alice, to: bob, width: 80, height: 24)
        let bobTerminal = try await chat(bob, to: alice, width: 80, height: 24)
        await assertScreen(aliceTerminal, shows: "-- connected as \(alice)")
        await assertScreen(bobTerminal, shows: "-- connected as \(bob)")

        for number in 1...20 {
            aliceTerminal.type("c msg \(number)\r")
            await assertScreen(bobTerminal, shows: "\(alice): c msg \(number)")
            bobTerminal.type("d msg \(number)\r")
            await assertScreen(aliceTerminal, shows: "\(bob): d msg \(number)")
            if number == 10 { aliceTerminal.type("\u{c}") } // Ctrl-L
        }
        let allRead = await aliceTerminal.waitForScreen { $0.lines.contains { $0.hasSuffix("c msg 20 ✓✓ read") } }
        XCTAssertTrue(allRead, aliceTerminal.screen.lines.joined(separator: "\n"))
        XCTAssertFalse(aliceTerminal.rawOutput.contains("read by"), "read receipts never reprint messages as lines")

        // Tab completes the command; a user who does not exist (as one who shares no conversation
        // with alice) has no presence information.
        aliceTerminal.type("/wh\t")
        let completed = await aliceTerminal.waitForScreen { $0.cursorLine.hasSuffix("> /who") }
        XCTAssertTrue(completed, aliceTerminal.screen.cursorLine)
        let nobody = "nobody-\(UInt32.random(in: 0 ... .max))"
        aliceTerminal.type("\(nobody)\r")
        await assertScreen(aliceTerminal, shows: "no presence information for \(nobody)")

        // Audio is sent with /audio and shown like an image link.
        bobTerminal.type("/audio https://example.com/voice.ogg\r")
        await assertScreen(aliceTerminal, shows: "\(bob): [audio] https://example.com/voice.ogg")

        // A message from someone else rings the bell and is counted in the prompt.
        let send = try ChildProcess(
            "simp", ["send", "--server", "127.0.0.1:\(relay.port)", "--user", carol, "--to", alice, "psst"],
            environment: try await credentials(carol))
        let sendStatus = await send.exitStatus()
        XCTAssertEqual(sendStatus, 0, send.standardError)
        let counted = await aliceTerminal.waitForScreen { $0.cursorLine.hasPrefix("[\(carol) 1] \(bob)>") }
        XCTAssertTrue(counted, aliceTerminal.screen.cursorLine)
        XCTAssertTrue(aliceTerminal.rawOutput.contains("\u{7}"), "the bell rang")

        // PageUp shows earlier lines and says how many are below; PageDown comes back.
        aliceTerminal.type("\u{1B}[5~")
        let paged = await aliceTerminal.waitForScreen { $0.cursorLine.contains("more ↓]") }
        XCTAssertTrue(paged, aliceTerminal.screen.cursorLine)
        aliceTerminal.type("\u{1B}[6~\u{1B}[6~")
        let back = await aliceTerminal.waitForScreen { $0.cursorLine.hasPrefix("[\(carol) 1] \(bob)>") }
        XCTAssertTrue(back, aliceTerminal.screen.cursorLine)

        aliceTerminal.type("/quit\r")
        bobTerminal.type("/quit\r")
        _ = await aliceTerminal.child.exitStatus()
        _ = await bobTerminal.child.exitStatus()
    }
}
