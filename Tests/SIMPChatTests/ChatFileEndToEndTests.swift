import Foundation
import NIOCore
import SIMPChat
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// `/file` and `/image` in two real `simp chat` processes on pseudo-terminals, against a real
/// relay and Redis: the sender's line shows the progress and then ✓✓, the receiver's chat
/// shows the file saved, and the saved copy has the sent file's SHA-256; both chats started
/// again show the files in the conversation.
final class ChatFileEndToEndTests: ClientHomeTestCase {
    var folder: URL!

    override func setUp() async throws {
        try await super.setUp()
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("simp-chat-files-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    override func tearDown() async throws {
        try? FileManager.default.removeItem(at: folder)
        try await super.tearDown()
    }

    /// `user`'s chat with `peer`, saving files into `folder/downloads-USER`; wide enough that a
    /// saved file's line (with its path) fits on one row.
    func chat(_ user: String, to peer: String) async throws -> PseudoTerminalProcess {
        try PseudoTerminalProcess(
            "simp",
            [
                "chat", "--server", "127.0.0.1:\(relay.port)", "--user", user, "--to", peer,
                "--downloads", downloads(of: user).path,
            ],
            environment: try await environment(user).merging(["NO_COLOR": "1"]) { $1 }, width: 250, height: 40)
    }

    func downloads(of user: String) -> URL { folder.appendingPathComponent("downloads-\(user)") }

    func testAFileAndAnImageSentFromChatAreSavedByTheOtherChatWithTheirDigest() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        // Larger than the sender's read window: it is read from disk a window at a time.
        var random = SystemRandomNumberGenerator()
        let contents = (0..<(FileSend.readWindow + 400_000)).map { _ in UInt8.random(in: 0...255, using: &random) }
        let payload = folder.appendingPathComponent("payload.bin")
        try Data(contents).write(to: payload)
        // A PNG header (3×2) in a file whose name has a space, pasted with a backslash as terminals do.
        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13] + Array("IHDR".utf8)
        png += [0, 0, 0, 3, 0, 0, 0, 2, 8, 6, 0, 0, 0] + Array(repeating: 0x42, count: 60)
        let picture = folder.appendingPathComponent("my dot.png")
        try Data(png).write(to: picture)

        let aliceTerminal = try await chat(alice, to: bob)
        let bobTerminal = try await chat(bob, to: alice)
        await assertScreen(aliceTerminal, shows: "-- connected as \(alice)")
        await assertScreen(bobTerminal, shows: "-- connected as \(bob)")
        aliceTerminal.type("hello bob\r") // the end-to-end session exists before the file's announcement
        await assertScreen(aliceTerminal, shows: "you → \(bob): hello bob ✓✓")

        aliceTerminal.type("/file \"\(payload.path)\"\r")
        let size = String(format: "%.1f MB", Double(contents.count) / 1e6)
        await assertScreen(bobTerminal, shows: "-- \(alice) is sending payload.bin (\(size))")
        await assertScreen(bobTerminal, shows: "\(alice): [file] payload.bin (\(size)) saved to \(downloads(of: bob).path)/payload.bin")
        await assertScreen(aliceTerminal, shows: "you → \(bob): [file] payload.bin (\(size)) ✓✓")
        let saved = try Data(contentsOf: downloads(of: bob).appendingPathComponent("payload.bin"))
        XCTAssertEqual(FileDigest.of(Array(saved)), FileDigest.of(contents))

        aliceTerminal.type("/image \(picture.path.replacingOccurrences(of: " ", with: "\\ "))\r")
        await assertScreen(bobTerminal, shows: "\(alice): [image] my dot.png 3×2 (\(png.count) bytes) saved to \(downloads(of: bob).path)/my dot.png")
        await assertScreen(aliceTerminal, shows: "you → \(bob): [image] my dot.png 3×2 (\(png.count) bytes) ✓✓")
        XCTAssertEqual(try Data(contentsOf: downloads(of: bob).appendingPathComponent("my dot.png")), Data(png))

        // Errors are lines, and the chat goes on.
        aliceTerminal.type("/file \(folder.path)/no such file\r")
        await assertScreen(aliceTerminal, shows: "-- no such file: \(folder.path)/no such file")
        aliceTerminal.type("/image \(payload.path)\r")
        await assertScreen(aliceTerminal, shows: "-- payload.bin is not a PNG, JPEG or GIF image: /file \(payload.path) sends it as a file")
        aliceTerminal.type("/file \(folder.path)\r")
        await assertScreen(aliceTerminal, shows: "-- \(folder.path) is a directory: /file sends one file")
        aliceTerminal.type("still here\r")
        await assertScreen(bobTerminal, shows: "\(alice): still here")
        await assertScreen(aliceTerminal, shows: "you → \(bob): still here ✓✓") // else /quit asks first

        for terminal in [aliceTerminal, bobTerminal] {
            terminal.type("/quit\r")
            let status = await terminal.child.exitStatus()
            XCTAssertEqual(status, 0, terminal.rawOutput)
        }

        // Both chats started again: the files are in the conversation, with their outcome and
        // where they were saved.
        let aliceAgain = try await chat(alice, to: bob)
        let bobAgain = try await chat(bob, to: alice)
        await assertScreen(aliceAgain, shows: "you → \(bob): [file] payload.bin (\(size)) ✓✓")
        await assertScreen(aliceAgain, shows: "you → \(bob): [image] my dot.png 3×2 (\(png.count) bytes) ✓✓")
        await assertScreen(bobAgain, shows: "\(alice): [file] payload.bin (\(size)) saved to \(downloads(of: bob).path)/payload.bin")
        await assertScreen(
            bobAgain, shows: "\(alice): [image] my dot.png 3×2 (\(png.count) bytes) saved to \(downloads(of: bob).path)/my dot.png")
        for terminal in [aliceAgain, bobAgain] {
            terminal.type("/quit\r")
            let status = await terminal.child.exitStatus()
            XCTAssertEqual(status, 0, terminal.rawOutput)
        }
    }

    /// bob is offline: alice's file is held by the relay (✓ (stored)); when bob's chat comes
    /// back and saves it, alice's line turns ✓✓ (the relay tells her, §5.7), and her next chat
    /// shows it so. A second file bob saves while alice's chat is closed: the relay keeps the
    /// news for her, and her next chat shows that file ✓✓ too.
    func testAStoredFileTurnsDeliveredWhenTheOfflineReceiverSavesItAlsoAfterARestart() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let one = folder.appendingPathComponent("one.bin"), two = folder.appendingPathComponent("two.bin")
        try Data(repeating: 1, count: 150_000).write(to: one)
        try Data(repeating: 2, count: 90_000).write(to: two)
        let oneLabel = ChatFile(path: one.path, name: "one.bin", size: 150_000).label
        let twoLabel = ChatFile(path: two.path, name: "two.bin", size: 90_000).label
        let aliceTerminal = try await chat(alice, to: bob)
        let bobTerminal = try await chat(bob, to: alice)
        await assertScreen(aliceTerminal, shows: "-- connected as \(alice)")
        await assertScreen(bobTerminal, shows: "-- connected as \(bob)")
        aliceTerminal.type("hello bob\r") // the end-to-end session exists before the files
        await assertScreen(aliceTerminal, shows: "you → \(bob): hello bob ✓✓")
        bobTerminal.type("/quit\r")
        let bobStatus = await bobTerminal.child.exitStatus()
        XCTAssertEqual(bobStatus, 0, bobTerminal.rawOutput)

        aliceTerminal.type("/file \(one.path)\r")
        await assertScreen(aliceTerminal, shows: "you → \(bob): \(oneLabel) ✓ (stored)")
        let bobBack = try await chat(bob, to: alice)
        await assertScreen(bobBack, shows: "\(alice): \(oneLabel) saved to \(downloads(of: bob).path)/one.bin")
        await assertScreen(aliceTerminal, shows: "you → \(bob): \(oneLabel) ✓✓")
        bobBack.type("/quit\r")
        _ = await bobBack.child.exitStatus()

        aliceTerminal.type("/file \(two.path)\r")
        await assertScreen(aliceTerminal, shows: "you → \(bob): \(twoLabel) ✓ (stored)")
        aliceTerminal.type("/quit\r")
        let aliceStatus = await aliceTerminal.child.exitStatus()
        XCTAssertEqual(aliceStatus, 0, aliceTerminal.rawOutput)
        let bobAgain = try await chat(bob, to: alice)
        await assertScreen(bobAgain, shows: "\(alice): \(twoLabel) saved to \(downloads(of: bob).path)/two.bin")
        XCTAssertEqual(try Data(contentsOf: downloads(of: bob).appendingPathComponent("two.bin")), try Data(contentsOf: two))

        let aliceAgain = try await chat(alice, to: bob)
        await assertScreen(aliceAgain, shows: "you → \(bob): \(oneLabel) ✓✓")
        await assertScreen(aliceAgain, shows: "you → \(bob): \(twoLabel) ✓✓")
        for terminal in [aliceAgain, bobAgain] {
            terminal.type("/quit\r")
            let status = await terminal.child.exitStatus()
            XCTAssertEqual(status, 0, terminal.rawOutput)
        }
    }

    /// The receiver's downloads folder cannot take the file: the sender's line says the
    /// receiver refused it and why, the receiver's chat says it was not received, no crash.
    /// Both chats started again show it so, and the sender's `/retry` sends it.
    func testAFileTheReceiverCannotWriteFailsWithTheReasonOnBothSides() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let payload = folder.appendingPathComponent("big.bin")
        try Data(repeating: 7, count: 300_000).write(to: payload)
        let aliceTerminal = try await chat(alice, to: bob)
        let bobTerminal = try await chat(bob, to: alice)
        await assertScreen(aliceTerminal, shows: "-- connected as \(alice)")
        await assertScreen(bobTerminal, shows: "-- connected as \(bob)")
        aliceTerminal.type("hello bob\r")
        await assertScreen(aliceTerminal, shows: "you → \(bob): hello bob ✓✓")
        // The part file's folder becomes a file: the first chunk cannot be written.
        let partial = downloads(of: bob).appendingPathComponent(".partial")
        try FileManager.default.removeItem(at: partial)
        try Data().write(to: partial)

        aliceTerminal.type("/file \(payload.path)\r")
        await assertScreen(bobTerminal, shows: "-- file not received: cannot write")
        await assertScreen(aliceTerminal, shows: "you → \(bob): [file] big.bin (300.0 kB) ✗ the receiver refused the file: cannot write")
        aliceTerminal.type("after\r")
        await assertScreen(bobTerminal, shows: "\(alice): after")
        await assertScreen(aliceTerminal, shows: "you → \(bob): after ✓✓")
        bobTerminal.type("/quit\r")
        let status = await bobTerminal.child.exitStatus()
        XCTAssertEqual(status, 0, bobTerminal.rawOutput)
        aliceTerminal.type("/quit\r")
        _ = await aliceTerminal.child.exitStatus()

        // Bob mends his downloads folder; alice's next chat shows the failed file, and /retry sends it.
        try FileManager.default.removeItem(at: partial)
        let bobAgain = try await chat(bob, to: alice)
        await assertScreen(bobAgain, shows: "\(alice): [file] big.bin (300.0 kB) (not received)")
        await assertScreen(bobAgain, shows: "-- connected as \(bob)")
        let aliceAgain = try await chat(alice, to: bob)
        await assertScreen(aliceAgain, shows: "you → \(bob): [file] big.bin (300.0 kB) ✗")
        await assertScreen(aliceAgain, shows: "-- connected as \(alice)")
        aliceAgain.type("/retry\r")
        await assertScreen(bobAgain, shows: "\(alice): [file] big.bin (300.0 kB) saved to \(downloads(of: bob).path)/big.bin")
        await assertScreen(aliceAgain, shows: "you → \(bob): [file] big.bin (300.0 kB) ✓✓")
        XCTAssertEqual(try Data(contentsOf: downloads(of: bob).appendingPathComponent("big.bin")), try Data(contentsOf: payload))
        for terminal in [aliceAgain, bobAgain] {
            terminal.type("/quit\r")
            let status = await terminal.child.exitStatus()
            XCTAssertEqual(status, 0, terminal.rawOutput)
        }
    }

    /// `/file` in a room: each member's chat saves the file (one transfer per member) and shows
    /// it as a room line (`#room alice: [file] …`, the room said inside the end-to-end
    /// announcement), also in its history; the sender's mark counts the members who have it whole.
    func testAFileInARoomReachesEveryMemberAndTheMarkCountsThem() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob"), carol = TestRelay.uniqueUser("carol")
        let room = "files\(UInt32.random(in: 0...UInt32.max))"
        var random = SystemRandomNumberGenerator()
        let contents = (0..<300_000).map { _ in UInt8.random(in: 0...255, using: &random) }
        let payload = folder.appendingPathComponent("notes.bin")
        try Data(contents).write(to: payload)
        let bobTerminal = try await chat(bob, to: alice)
        let carolTerminal = try await chat(carol, to: alice)
        for terminal in [bobTerminal, carolTerminal] {
            await assertScreen(terminal, shows: "-- connected as ")
            terminal.type("/join \(room)\r")
            await assertScreen(terminal, shows: "joined #\(room)")
        }
        let aliceTerminal = try await chat(alice, to: bob)
        await assertScreen(aliceTerminal, shows: "-- connected as \(alice)")
        aliceTerminal.type("/join \(room)\r")
        await assertScreen(aliceTerminal, shows: "joined #\(room)")

        aliceTerminal.type("/file \(payload.path)\r")
        for (user, terminal) in [(bob, bobTerminal), (carol, carolTerminal)] {
            await assertScreen(terminal, shows: "#\(room) \(alice) is sending notes.bin (300.0 kB)")
            await assertScreen(
                terminal, shows: "#\(room) \(alice): [file] notes.bin (300.0 kB) saved to \(downloads(of: user).path)/notes.bin")
            let saved = try Data(contentsOf: downloads(of: user).appendingPathComponent("notes.bin"))
            XCTAssertEqual(FileDigest.of(Array(saved)), FileDigest.of(contents), user)
        }
        await assertScreen(aliceTerminal, shows: "you → #\(room): [file] notes.bin (300.0 kB) ✓✓ 2/2")

        for terminal in [aliceTerminal, bobTerminal, carolTerminal] {
            terminal.type("/quit\r")
            let status = await terminal.child.exitStatus()
            XCTAssertEqual(status, 0, terminal.rawOutput)
        }
        // The history keeps the room: the chat opened again shows the same room line.
        let history = home.appendingPathComponent("history")
        for user in [bob, carol] {
            let files = try HistoryStore(directory: history, user: user).load().compactMap(\.file)
            XCTAssertEqual(files.map(\.room), [room], user)
            XCTAssertEqual(files.map(\.path), ["\(downloads(of: user).path)/notes.bin"], user)
        }
    }

    /// `/file` in a room whose members carol and dave are offline (bob is online): the relay
    /// holds the file for them, and alice's mark counts bob only (`✓ 1/3`; before, `✓✓ 3/3`
    /// at once), then each of them as their chat comes back and fetches it (`✓ 2/3`, `✓✓ 3/3`).
    func testARoomFilesMarkCountsEachOfflineMemberOnceTheirChatHasIt() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let carol = TestRelay.uniqueUser("carol"), dave = TestRelay.uniqueUser("dave")
        let room = "held\(UInt32.random(in: 0...UInt32.max))"
        let payload = folder.appendingPathComponent("notes.bin")
        try Data(repeating: 7, count: 200_000).write(to: payload)
        let label = ChatFile(path: payload.path, name: "notes.bin", size: 200_000).label
        var terminals: [String: PseudoTerminalProcess] = [:]
        for member in [bob, carol, dave] {
            let terminal = try await chat(member, to: alice)
            await assertScreen(terminal, shows: "-- connected as ")
            terminal.type("/join \(room)\r")
            await assertScreen(terminal, shows: "joined #\(room)")
            terminals[member] = terminal
        }
        for member in [carol, dave] {
            terminals[member]!.type("/quit\r")
            let status = await terminals[member]!.child.exitStatus()
            XCTAssertEqual(status, 0, terminals[member]!.rawOutput)
        }
        let aliceTerminal = try await chat(alice, to: bob)
        await assertScreen(aliceTerminal, shows: "-- connected as \(alice)")
        aliceTerminal.type("/join \(room)\r")
        await assertScreen(aliceTerminal, shows: "joined #\(room)")
        aliceTerminal.type("/file \(payload.path)\r")
        await assertScreen(terminals[bob]!, shows: "#\(room) \(alice): \(label) saved to")
        await assertScreen(aliceTerminal, shows: "you → #\(room): \(label) ✓ 1/3")
        for (member, mark) in [(carol, "✓ 2/3"), (dave, "✓✓ 3/3")] {
            let back = try await chat(member, to: alice)
            await assertScreen(back, shows: "#\(room) \(alice): \(label) saved to \(downloads(of: member).path)/notes.bin")
            await assertScreen(aliceTerminal, shows: "you → #\(room): \(label) \(mark)")
            terminals[member] = back
        }
        for terminal in [aliceTerminal] + terminals.values {
            terminal.type("/quit\r")
            let status = await terminal.child.exitStatus()
            XCTAssertEqual(status, 0, terminal.rawOutput)
        }
    }
}
