import Foundation
import NIOCore
import SIMPChat
import SIMPCore
import SIMPTestSupport
import XCTest

/// `/verify` in two real `simp chat` processes against a real relay and Redis: both sides show
/// the same safety number, and so does `simp keys --with` on the command line.
final class ChatVerifyEndToEndTests: ClientHomeTestCase {
    func chat(_ user: String, to peer: String) async throws -> PseudoTerminalProcess {
        try PseudoTerminalProcess(
            "simp", ["chat", "--server", "127.0.0.1:\(relay.port)", "--user", user, "--to", peer],
            environment: try await environment(user).merging(["NO_COLOR": "1"]) { $1 }, width: 100, height: 30)
    }

    /// The 60 digits `/verify` printed (twelve groups of five), if any.
    func safetyNumbers(on terminal: PseudoTerminalProcess) -> [String] {
        terminal.screen.transcript.map { $0.trimmingCharacters(in: .whitespaces) }.filter { line in
            let groups = line.split(separator: " ")
            return groups.count == 12 && groups.allSatisfy { $0.count == 5 && $0.allSatisfy(\.isNumber) }
        }
    }

    func testBothSidesOfAChatSeeTheSameSafetyNumberAndEncryptedLinesAreNotMarked() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let aliceTerminal = try await chat(alice, to: bob)
        let bobTerminal = try await chat(bob, to: alice)
        await assertScreen(aliceTerminal, shows: "-- connected as \(alice)")
        await assertScreen(bobTerminal, shows: "-- connected as \(bob)")

        aliceTerminal.type("hello bob\r")
        await assertScreen(bobTerminal, shows: "\(alice): hello bob")
        XCTAssertFalse(bobTerminal.screen.transcript.contains { $0.contains("(not encrypted)") }, "it came end to end encrypted")

        aliceTerminal.type("/verify\r")
        bobTerminal.type("/verify \(alice)\r")
        await assertScreen(aliceTerminal, shows: "-- \(bob) sees the same with /verify \(alice): compare in person or on a call")
        await assertScreen(bobTerminal, shows: "-- \(alice) sees the same with /verify \(bob): compare in person or on a call")
        await assertScreen(aliceTerminal, shows: "-- safety number with \(bob)'s device ")
        let aliceNumbers = safetyNumbers(on: aliceTerminal), bobNumbers = safetyNumbers(on: bobTerminal)
        XCTAssertEqual(aliceNumbers.count, 1, aliceTerminal.screen.transcript.joined(separator: "\n"))
        XCTAssertEqual(aliceNumbers, bobNumbers)

        for terminal in [aliceTerminal, bobTerminal] {
            terminal.type("/quit\r")
            let status = await terminal.child.exitStatus()
            XCTAssertEqual(status, 0, terminal.rawOutput)
        }

        // On the command line, with the device the chat used (free again), the same number.
        let keys = try ChildProcess(
            "simp", ["keys", "--server", "127.0.0.1:\(relay.port)", "--user", alice, "--with", bob],
            environment: try await environment(alice))
        let status = await keys.exitStatus()
        XCTAssertEqual(status, 0, keys.standardError)
        let printed = keys.standardOutput.split(separator: "\n").map(String.init)
        XCTAssertEqual(printed.count, 3, keys.standardOutput)
        XCTAssertEqual(printed.first.map { $0.hasPrefix("safety number with \(bob)'s device ") }, true, keys.standardOutput)
        XCTAssertEqual(printed.dropFirst().first?.trimmingCharacters(in: .whitespaces), aliceNumbers.first)
    }

    /// `simp keys` beside an open `simp chat` of the same device refuses and names the chat's
    /// process: it makes no device and no keys, publishes nothing, and the chat keeps its
    /// session. A user with no device on this machine yet gets no new one either.
    func testSimpKeysBesideARunningChatRefusesNamingItAndMakesNoDevice() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob"), carol = TestRelay.uniqueUser("carol")
        let aliceTerminal = try await chat(alice, to: bob)
        await assertScreen(aliceTerminal, shows: "-- connected as \(alice)")
        let published = try await Eventually.holds {
            try await self.relay.inspector.command(["HLEN", "simp:keys:{\(alice)}"]).integer == 1
        }
        XCTAssertTrue(published)

        let keys = try ChildProcess(
            "simp", ["keys", "--server", "127.0.0.1:\(relay.port)", "--user", alice, "--with", bob], environment: try await environment(alice))
        let status = await keys.exitStatus()
        XCTAssertEqual(status, 1, keys.standardOutput)
        XCTAssertTrue(keys.standardError.contains("is in use by a running simp (process \(aliceTerminal.child.pid))"), keys.standardError)
        XCTAssertTrue(keys.standardError.contains("use /verify \(bob) in that chat"), keys.standardError)
        let devices = try FileManager.default.contentsOfDirectory(atPath: home.appendingPathComponent("e2e/\(alice)").path)
        XCTAssertEqual(devices.count, 1, "only the chat's device has keys: \(devices)")
        let bundles = try await relay.inspector.command(["HLEN", "simp:keys:{\(alice)}"]).integer
        XCTAssertEqual(bundles, 1, "no second device published keys")

        aliceTerminal.type("/quit\r")
        let quit = await aliceTerminal.child.exitStatus()
        XCTAssertEqual(quit, 0, aliceTerminal.rawOutput)

        let fresh = try ChildProcess(
            "simp", ["keys", "--server", "127.0.0.1:\(relay.port)", "--user", carol, "--with", bob, "--device", "tablet"],
            environment: try await environment(carol))
        let freshStatus = await fresh.exitStatus()
        XCTAssertEqual(freshStatus, 1, fresh.standardOutput)
        XCTAssertTrue(fresh.standardError.contains("has no end-to-end keys yet"), fresh.standardError)
        XCTAssertFalse(FileManager.default.fileExists(atPath: home.appendingPathComponent("e2e/\(carol)/tablet/identity").path), "no keys made")
        let carolBundles = try await relay.inspector.command(["HLEN", "simp:keys:{\(carol)}"]).integer
        XCTAssertEqual(carolBundles, 0, "nothing published")
    }
}
