import Foundation
import NIOCore
import SIMPChat
import SIMPClient
import SIMPCommandLine
import SIMPTestSupport
import XCTest

/// `simp chat` run as people run it: on pseudo-terminals, or with a script on stdin, against a
/// real relay and Redis.
final class ChatEndToEndTests: RelayTestCase {
    var historyDirectory: URL!

    override func setUp() async throws {
        try await super.setUp()
        historyDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-chat-\(UUID().uuidString)")
    }

    override func tearDown() async throws {
        try? FileManager.default.removeItem(at: historyDirectory)
        try await super.tearDown()
    }

    /// `simp chat` for `user` (created with its test password), which it takes from the
    /// environment, or, with `typesPassword`, is asked for and typed at the prompt.
    func chat(
        _ user: String, to peer: String, _ extra: [String] = [], typesPassword: Bool = false,
        width: Int = 100, height: Int = 30
    ) async throws -> PseudoTerminalProcess {
        var environment = ["NO_COLOR": "1"]
        if !typesPassword { environment.merge(try await credentials(user)) { $1 } } else { try await relay.addUser(user) }
        let terminal = try PseudoTerminalProcess(
            "simp",
            [
                "chat", "--server", "127.0.0.1:\(relay.port)", "--user", user, "--to", peer,
                "--history-dir", historyDirectory.path,
            ] + extra, environment: environment, width: width, height: height)
        if typesPassword {
            await assertScreen(terminal, shows: "password for \(user):")
            terminal.type(TestRelay.password(for: user) + "\r")
        }
        return terminal
    }

    /// Creates `user` and returns the environment that gives `simp` its password.
    func credentials(_ user: String) async throws -> [String: String] {
        try await relay.addUser(user)
        return [PasswordInput.environmentVariable: TestRelay.password(for: user)]
    }

    func testTwoPeopleChatOnTerminalsAndSeeDeliveryTicks() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let aliceTerminal = try await chat(alice, to: bob, typesPassword: true)
        let bobTerminal = try await chat(bob, to: alice)
        await assertScreen(aliceTerminal, shows: "-- connected as \(alice)")
        await assertScreen(bobTerminal, shows: "-- connected as \(bob)")

        aliceTerminal.type("hello bob\r")
        await assertScreen(bobTerminal, shows: "\(alice): hello bob")
        await assertScreen(aliceTerminal, shows: "you → \(bob): hello bob ✓✓")
        // bob talks to alice, so he has seen it at once: his read marker turns her ticks to read.
        await assertScreen(aliceTerminal, shows: "you → \(bob): hello bob ✓✓ read")

        bobTerminal.type("hi alice, 日本 ✓\r")
        await assertScreen(aliceTerminal, shows: "\(bob): hi alice, 日本 ✓")
        await assertScreen(bobTerminal, shows: "you → \(alice): hi alice, 日本 ✓ ✓✓")

        // A message arriving while alice is typing leaves her line as it was.
        aliceTerminal.type("half-typ")
        let typing = await aliceTerminal.waitForScreen { $0.cursorLine.hasSuffix("> half-typ") }
        XCTAssertTrue(typing, aliceTerminal.screen.cursorLine)
        bobTerminal.type("/image https://example.com/cat.png 0.5\r")
        await assertScreen(aliceTerminal, shows: "\(bob): [image] https://example.com/cat.png (scale 0.5)")
        XCTAssertTrue(aliceTerminal.screen.cursorLine.hasSuffix("> half-typ"), aliceTerminal.screen.cursorLine)
        aliceTerminal.type("ed\r")
        await assertScreen(bobTerminal, shows: "\(alice): half-typed")
        // Delivered before /quit (else the chat asks first: a message is not yet delivered).
        await assertScreen(aliceTerminal, shows: "you → \(bob): half-typed ✓✓")

        aliceTerminal.type("/quit\r")
        bobTerminal.type("\u{4}")
        let aliceStatus = await aliceTerminal.child.exitStatus()
        let bobStatus = await bobTerminal.child.exitStatus()
        XCTAssertEqual(aliceStatus, 0, aliceTerminal.rawOutput)
        XCTAssertEqual(bobStatus, 0, bobTerminal.rawOutput)

        // The conversation is on disk, and shown when alice comes back.
        let history = try HistoryStore(directory: historyDirectory, user: alice).load()
        XCTAssertEqual(history.map(\.text).filter { !$0.isEmpty }, ["hello bob", "hi alice, 日本 ✓", "half-typed"])
        XCTAssertEqual(history.first?.status, "read")
        let again = try await chat(alice, to: bob)
        await assertScreen(again, shows: "you → \(bob): hello bob ✓✓")
        again.type("/quit\r")
        _ = await again.child.exitStatus()
    }

    func testBothSurviveARelayRestartAndEveryMessageArrivesOnce() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let aliceTerminal = try await chat(alice, to: bob, ["--log-level", "info"])
        let bobTerminal = try await chat(bob, to: alice)
        await assertScreen(aliceTerminal, shows: "-- connected as \(alice)")
        await assertScreen(bobTerminal, shows: "-- connected as \(bob)")
        aliceTerminal.type("before\r")
        await assertScreen(aliceTerminal, shows: "you → \(bob): before ✓✓")

        // The relay goes away; both notice by themselves and type while it is down.
        let restart = Task { [relay = relay!] in try await relay.restart(downtime: .milliseconds(700)) }
        await assertScreen(aliceTerminal, shows: "-- connection lost; reconnecting in")
        await assertScreen(bobTerminal, shows: "-- connection lost; reconnecting in")
        await assertScreen(aliceTerminal, shows: "-- info: lost the relay; reconnecting")
        aliceTerminal.type("during the outage\r")
        bobTerminal.type("me too, offline\r")
        try await restart.value

        await assertScreen(aliceTerminal, shows: "-- reconnected")
        await assertScreen(bobTerminal, shows: "-- reconnected")
        await assertScreen(bobTerminal, shows: "\(alice): during the outage")
        await assertScreen(aliceTerminal, shows: "\(bob): me too, offline")
        await assertScreen(aliceTerminal, shows: "you → \(bob): during the outage ✓✓")
        await assertScreen(bobTerminal, shows: "you → \(alice): me too, offline ✓✓")
        aliceTerminal.type("after\r")
        await assertScreen(bobTerminal, shows: "\(alice): after")
        await assertScreen(aliceTerminal, shows: "you → \(bob): after ✓✓")

        let raw = aliceTerminal.rawOutput
        let typed = raw.range(of: "during the outage …"), back = raw.range(of: "-- reconnected")
        XCTAssertTrue(typed != nil && back != nil && typed!.lowerBound < back!.lowerBound, "typed while the relay was down")
        XCTAssertFalse(raw.contains("\u{1B}[0m"), "NO_COLOR: no colours")
        let bobSaw = bobTerminal.screen.transcript.filter { $0.contains("\(alice): ") && !$0.contains("you →") }.map {
            $0.components(separatedBy: ": ").last!
        }
        XCTAssertEqual(bobSaw, ["before", "during the outage", "after"], "each exactly once, in order")
        let aliceSaw = aliceTerminal.screen.transcript.filter { $0.contains("\(bob): ") && !$0.contains("you →") }
        XCTAssertEqual(aliceSaw.count, 1, aliceSaw.joined(separator: "\n"))
        aliceTerminal.type("/quit\r")
        bobTerminal.type("/quit\r")
        _ = await aliceTerminal.child.exitStatus()
        _ = await bobTerminal.child.exitStatus()
    }

    func testScriptedChatReadsStdinAndPrintsPlainLines() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let listen = try ChildProcess(
            "simp", ["listen", "--server", "127.0.0.1:\(relay.port)", "--user", bob, "--count", "2"],
            environment: try await credentials(bob))
        let registered = try await Eventually.holds {
            try await self.relay.inspector.command(["EXISTS", "simp:user:{\(bob)}"]).integer == 1
        }
        XCTAssertTrue(registered, listen.standardError)
        let script = historyDirectory.appendingPathComponent("script.txt")
        try FileManager.default.createDirectory(at: historyDirectory, withIntermediateDirectories: true)
        try "@\(bob) one\n/bogus\n\ntwo\n".write(to: script, atomically: true, encoding: .utf8)

        let chat = try ChildProcess(
            "simp",
            [
                "chat", "--server", "127.0.0.1:\(relay.port)", "--user", alice, "--history-dir", historyDirectory.path,
            ], environment: try await credentials(alice), standardInput: try FileHandle(forReadingFrom: script))

        let status = await chat.exitStatus()
        XCTAssertEqual(status, 0, chat.standardOutput + chat.standardError)
        let lines = chat.standardOutput.split(separator: "\n").map(String.init)
        XCTAssertFalse(chat.standardOutput.contains("\u{1B}"), "no escape sequences without a terminal")
        XCTAssertTrue(lines.contains { $0.hasSuffix("you → \(bob): one ✓") }, chat.standardOutput)
        XCTAssertTrue(lines.contains { $0.hasPrefix("✓✓ delivered to \(bob): \"one\"") }, chat.standardOutput)
        XCTAssertTrue(lines.contains { $0.hasPrefix("✓✓ delivered to \(bob): \"two\"") }, chat.standardOutput)
        XCTAssertTrue(lines.contains { $0.hasPrefix("-- unknown command /bogus") }, chat.standardOutput)
        let listenStatus = await listen.exitStatus()
        XCTAssertEqual(listenStatus, 0)
        // Each line is marked with alice's device and whether it is verified.
        XCTAssertTrue(
            listen.standardOutput.contains(", not verified): one") && listen.standardOutput.contains(", not verified): two"), listen.standardOutput)
    }

    func testScriptedChatToAnUnknownUserExitsOneWithTheReason() async throws {
        let nobody = TestRelay.uniqueUser("nobody")
        let script = historyDirectory.appendingPathComponent("script.txt")
        try FileManager.default.createDirectory(at: historyDirectory, withIntermediateDirectories: true)
        try "hello?\n".write(to: script, atomically: true, encoding: .utf8)
        let alice = TestRelay.uniqueUser("alice")
        let chat = try ChildProcess(
            "simp",
            [
                "chat", "--server", "127.0.0.1:\(relay.port)", "--user", alice, "--to", nobody,
                "--history-dir", historyDirectory.path,
            ], environment: try await credentials(alice), standardInput: try FileHandle(forReadingFrom: script))
        let status = await chat.exitStatus()
        XCTAssertEqual(status, 1)
        XCTAssertTrue(chat.standardOutput.contains("no user \"\(nobody)\" is registered"), chat.standardOutput)
    }
}
