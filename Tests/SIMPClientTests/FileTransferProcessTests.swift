import Foundation
import SIMPClient
import SIMPCore
import SIMPLocalServers
import SIMPTestSupport
import XCTest

/// `simp send --file` to `simp listen --downloads` as real processes through a relay on
/// loopback (docs/PROTOCOL.md §5.6), whole and with a receiver, a sender or the relay killed
/// halfway. Every transfer must send at most 10 % more than the file plus one window (the
/// sender's summary line says what it sent and its largest window).
final class FileTransferProcessTests: StoryProcessTestCase {
    func testTwentyMegabytesArriveWholeWithTheirDigest() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let downloads = home.appendingPathComponent("downloads-\(bob)")
        let listen = try await listenForFiles(bob, into: downloads)
        let (contents, send) = try await sendWhole("big.bin", megabytes: 20, seed: 38, from: alice, to: bob, saved: listen, into: downloads)
        print("file transfer through the relay: \(send.standardOutput)") // "file big.bin delivered to bob in N s"
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: downloads.appendingPathComponent(".partial").path), [])
        assertSentAtMostTheBound(for: contents.count, by: [send])
    }

    /// `simp send --room --file`: one transfer per member who reads the room, each member's
    /// `simp listen` saves the file whole and says it was sent in the room, and the sender
    /// says how many have it.
    func testAFileSentToARoomReachesEachMember() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob"), carol = TestRelay.uniqueUser("carol")
        let room = "files\(UInt32.random(in: 0...UInt32.max))"
        var listens: [(ChildProcess, URL)] = []
        for member in [bob, carol] {
            let downloads = home.appendingPathComponent("downloads-\(member)")
            listens.append((try await listenForFiles(member, into: downloads, extra: ["--room", room]), downloads))
        }
        let contents = try randomFile(megabytes: 3, seed: 41, into: "room.bin")
        let send = try ChildProcess(
            "simp",
            [
                "send", "--server", "127.0.0.1:\(relay.port)", "--user", alice, "--room", room, "--join", "--file",
                home.appendingPathComponent("room.bin").path,
            ],
            environment: try await environment(alice))
        children.append(send)
        let status = await send.exitStatus(timeout: 300)
        XCTAssertEqual(status, 0, send.standardError)
        XCTAssertTrue(send.standardOutput.hasPrefix("file room.bin delivered to 2 of 2 members of #\(room) in "), send.standardOutput)
        for (listen, downloads) in listens {
            try await assertSaved("room.bin", contents, by: [listen], into: downloads)
            XCTAssertTrue(listen.standardOutput.contains("from \(alice) in #\(room) saved to \(downloads.path)/room.bin"), listen.standardOutput)
        }
    }

    /// A file's announcement names its room inside the end-to-end payload; `simp listen --json`
    /// says `room` only when the relay lists both the receiver and the sender as members. A room
    /// the receiver is not in, or one its sender is not in (a forged name), shows as a direct file.
    func testAFileShowsItsRoomOnlyWhenBothAreMembers() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let tag = UInt32.random(in: 0...UInt32.max)
        let shared = "shared\(tag)", alicesOnly = "alices\(tag)", bobsOnly = "bobs\(tag)"
        let downloads = home.appendingPathComponent("downloads-\(bob)")
        let listen = try ChildProcess(
            "simp",
            [
                "listen", "--server", "127.0.0.1:\(relay.port)", "--user", bob, "--device", "phone", "--downloads", downloads.path,
                "--json", "--room", shared, "--room", bobsOnly,
            ],
            environment: try await environment(bob))
        children.append(listen)
        let client = try await relay.connectClient(user: alice) {
            $0.device = "laptop"; $0.endToEnd = EndToEndSettings(home: self.home)
        }
        _ = try await client.joinRoom(shared)
        _ = try await client.joinRoom(alicesOnly)
        let joined = await Eventually.holds(within: .seconds(30)) {
            if (try? await client.roomMembers(shared))?.contains(bob) == true { return true }
            try? await Task.sleep(nanoseconds: 200_000_000) // not too many requests while bob's listen starts
            return false
        }
        XCTAssertTrue(joined, listen.standardError)
        let router = FileDatagramRouter(client: client)
        for (index, room) in [shared, alicesOnly, bobsOnly].enumerated() {
            _ = try randomFile(megabytes: 1, seed: 50 + UInt64(index), into: "\(room).bin")
            let transfer = try FileSend(client: client, path: home.appendingPathComponent("\(room).bin").path, to: bob, room: room, home: home)
            try await transfer.run(datagrams: router.acknowledgements()) { _ in }
        }
        router.stop()
        await client.close()
        let saved = await Eventually.holds { self.savedFiles(by: listen).count == 3 }
        XCTAssertTrue(saved, listen.standardOutput + listen.standardError)
        let files = savedFiles(by: listen)
        XCTAssertEqual(files["\(shared).bin"]?["room"] as? String, shared, listen.standardOutput)
        for name in ["\(alicesOnly).bin", "\(bobsOnly).bin"] {
            XCTAssertEqual(files[name]?["from"] as? String, alice, listen.standardOutput)
            XCTAssertNil(files[name]?["room"], "\(name) shown in a room: \(listen.standardOutput)")
        }
    }

    /// The files `simp listen --json` said it saved: each line's object by the file's name.
    private func savedFiles(by listen: ChildProcess) -> [String: [String: Any]] {
        var files: [String: [String: Any]] = [:]
        for line in listen.standardOutput.split(separator: "\n") {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let name = (object["file"] as? [String: Any])?["name"] as? String
            else { continue }
            files[name] = object
        }
        return files
    }

    /// Where the network blocks UDP on both sides (the LD_PRELOAD shim), the chunks and their
    /// acknowledgements go over the control connections (PROTOCOL §5.5) and the file arrives whole.
    func testAFileArrivesWholeWhenBothSidesUDPIsBlocked() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let blocked = try await UDPBlockShim.environment()
        let downloads = home.appendingPathComponent("downloads-\(bob)")
        let listen = try await listenForFiles(bob, into: downloads, adding: blocked)
        let contents = try randomFile(megabytes: 2, seed: 43, into: "no-udp.bin")
        let send = try await sendFile("no-udp.bin", from: alice, to: bob, adding: blocked)
        let status = await send.exitStatus(timeout: 300)
        XCTAssertEqual(status, 0, send.standardError)
        try await assertSaved("no-udp.bin", contents, by: [listen], into: downloads)
        assertSentAtMostTheBound(for: contents.count, by: [send])
    }

    /// A file to a user the relay does not know fails at once with the relay's reason in words,
    /// not the send outcome's Swift form.
    func testAFileToAnUnknownUserFailsWithTheReasonInWords() async throws {
        let alice = TestRelay.uniqueUser("alice"), nobody = TestRelay.uniqueUser("nobody")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        _ = try randomFile(megabytes: 1, seed: 42, into: "lost.bin")
        let send = try await sendFile("lost.bin", from: alice, to: nobody)
        let status = await send.exitStatus(timeout: 120)
        XCTAssertNotEqual(status, 0, send.standardOutput)
        XCTAssertTrue(send.standardError.contains("no user \"\(nobody)\""), send.standardError)
        XCTAssertFalse(send.standardError.contains("messageId:"), send.standardError)
    }

    func testAReceiverKilledHalfwayResumesWhereItSaved() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let downloads = home.appendingPathComponent("downloads-\(bob)")
        let first = try await listenForFiles(bob, into: downloads)
        let contents = try randomFile(megabytes: 20, seed: 39, into: "half.bin")
        let send = try await sendFile("half.bin", from: alice, to: bob)
        try await kill(first, once: send, reached: 10)
        let second = try await listenForFiles(bob, into: downloads)
        let status = await send.exitStatus(timeout: 300)
        XCTAssertEqual(status, 0, send.standardError)
        // The sender's progress counts acknowledged bytes, which lag behind what arrived: the
        // first receiver may have had every chunk and saved the file before the kill.
        try await assertSaved("half.bin", contents, by: [first, second], into: downloads)
        assertSentAtMostTheBound(for: contents.count, by: [send])
    }

    func testASenderKilledHalfwayResumesWhenTheSameFileIsSentAgain() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let downloads = home.appendingPathComponent("downloads-\(bob)")
        let listen = try await listenForFiles(bob, into: downloads)
        let contents = try randomFile(megabytes: 8, seed: 40, into: "again.bin")
        let first = try await sendFile("again.bin", from: alice, to: bob)
        try await kill(first, once: first, reached: 4)
        let second = try await sendFile("again.bin", from: alice, to: bob)
        let status = await second.exitStatus(timeout: 300)
        XCTAssertEqual(status, 0, second.standardError)
        XCTAssertTrue(second.standardError.contains("resuming the transfer"), second.standardError)
        try await assertSaved("again.bin", contents, by: [listen], into: downloads)
        // Both runs together: the first one's last progress line, the second one's summary.
        assertSentAtMostTheBound(for: contents.count, by: [first, second])
    }

    func testAFileReceivedBeforeAndSentAgainIsAnsweredDoneWithoutGoingOverAgain() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let downloads = home.appendingPathComponent("downloads-\(bob)")
        let first = try await listenForFiles(bob, into: downloads)
        let (contents, _) = try await sendWhole("twice.bin", megabytes: 2, seed: 42, from: alice, to: bob, saved: first, into: downloads)
        // bob's listener started again (it forgot the transfer); alice sends the same file again.
        first.signal(SIGKILL)
        _ = await first.exitStatus(timeout: 5)
        let second = try await listenForFiles(bob, into: downloads)
        let again = try await sendFile("twice.bin", from: alice, to: bob)
        let againStatus = await again.exitStatus(timeout: 120)
        XCTAssertEqual(againStatus, 0, again.standardError)
        let answered = await Eventually.holds(within: .seconds(15)) { second.standardOutput.contains("sent again: already saved at") }
        XCTAssertTrue(answered, second.standardOutput + second.standardError)
        let summary = again.standardError.split(separator: "\n").last { $0.hasPrefix("sent ") } ?? ""
        let sent = Double(summary.split(separator: " ").dropFirst().first ?? "") ?? .infinity
        print("the same file sent again: \(summary)")
        XCTAssertLessThan(sent, 0.05 * Double(contents.count), "at most the first window goes before done: \(summary)")
        let saved = try FileManager.default.contentsOfDirectory(atPath: downloads.path).filter { !$0.hasPrefix(".") }
        XCTAssertEqual(saved, ["twice.bin"], "no second copy")
    }

    func testARelayKilledHalfwayAndStartedAgainStillDeliversTheFile() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let port = try FreePort.tcp(), udpPort = try FreePort.udp()
        let relayId = "files-\(UInt32.random(in: .min ... .max))"
        let arguments = ["--port", String(port), "--udp-port", String(udpPort), "--redis", relay.redis.url.description, "--relay-id", relayId]
        let server = "127.0.0.1:\(port)"
        let relayProcess = try await startServer(arguments)
        let downloads = home.appendingPathComponent("downloads-\(bob)")
        let listen = try await listenForFiles(bob, into: downloads, server: server)
        let contents = try randomFile(megabytes: 6, seed: 41, into: "outage.bin")
        let send = try await sendFile("outage.bin", from: alice, to: bob, server: server)
        try await kill(relayProcess, once: send, reached: 3)
        try await Task.sleep(nanoseconds: 1_000_000_000) // the relay is gone for 1 s
        let restarted = try await startServer(arguments)
        let status = await send.exitStatus(timeout: 300)
        XCTAssertEqual(status, 0, send.standardError + "\nlistener: " + listen.standardError.suffix(1000))
        try await assertSaved("outage.bin", contents, by: [listen], into: downloads)
        assertSentAtMostTheBound(for: contents.count, by: [send])
        restarted.signal(SIGTERM)
        _ = await restarted.exitStatus()
    }

    /// `simp listen` of `user`'s device "phone" on `server` (default: the test's relay), saving
    /// files into `downloads`, once it listens.
    private func listenForFiles(
        _ user: String, into downloads: URL, server: String? = nil, extra: [String] = [], adding: [String: String] = [:]
    ) async throws -> ChildProcess {
        let listen = try ChildProcess(
            "simp",
            ["listen", "--server", server ?? "127.0.0.1:\(relay.port)", "--user", user, "--device", "phone", "--downloads", downloads.path]
                + extra,
            environment: try await environment(user).merging(adding) { $1 })
        children.append(listen)
        let listening = await Eventually.holds(within: .seconds(15)) { listen.standardError.contains("listening as") }
        XCTAssertTrue(listening, listen.standardError)
        return listen
    }

    /// `megabytes` MB of seeded random bytes written to `name` under the test's home; returns them.
    private func randomFile(megabytes: Int, seed: UInt64, into name: String) throws -> [UInt8] {
        var random = SplitMix64(seed: seed)
        let contents = (0..<megabytes * 1_000_000 / 8).flatMap { _ in withUnsafeBytes(of: random.next()) { Array($0) } }
        XCTAssertTrue(FileManager.default.createFile(atPath: home.appendingPathComponent(name).path, contents: Data(contents)))
        return contents
    }

    /// `simp send --file` of `name` (under the test's home) from `sender` to `receiver` through
    /// `server` (default: the test's relay).
    private func sendFile(
        _ name: String, from sender: String, to receiver: String, server: String? = nil, adding: [String: String] = [:]
    ) async throws -> ChildProcess {
        let send = try ChildProcess(
            "simp",
            [
                "send", "--server", server ?? "127.0.0.1:\(relay.port)", "--user", sender, "--to", receiver, "--file",
                home.appendingPathComponent(name).path,
            ],
            environment: try await environment(sender).merging(adding) { $1 })
        children.append(send)
        return send
    }

    /// `megabytes` MB of seeded random bytes as `name`, sent from `sender` to `receiver`: the
    /// send exits 0 and `listen` saves the file whole into `downloads`.
    private func sendWhole(
        _ name: String, megabytes: Int, seed: UInt64, from sender: String, to receiver: String, saved listen: ChildProcess, into downloads: URL
    ) async throws -> (contents: [UInt8], send: ChildProcess) {
        let contents = try randomFile(megabytes: megabytes, seed: seed, into: name)
        let send = try await sendFile(name, from: sender, to: receiver)
        let status = await send.exitStatus(timeout: 300)
        XCTAssertEqual(status, 0, send.standardError)
        try await assertSaved(name, contents, by: [listen], into: downloads)
        return (contents, send)
    }

    /// Kills `victim` with SIGKILL once `send`'s progress says the receiver acknowledged `megabytes` MB.
    private func kill(_ victim: ChildProcess, once send: ChildProcess, reached megabytes: Double) async throws {
        let reached = await Eventually.holds(within: .seconds(120)) {
            send.standardError.split(separator: "\n").last { $0.contains(" MB of ") }.map { Double($0.prefix { $0 != " " }) ?? 0 >= megabytes }
                ?? false
        }
        XCTAssertTrue(reached, send.standardError)
        victim.signal(SIGKILL)
        _ = await victim.exitStatus(timeout: 5)
    }

    /// Waits until one of `runs` said it saved `name`, then checks the saved file's digest.
    private func assertSaved(_ name: String, _ contents: [UInt8], by runs: [ChildProcess], into downloads: URL) async throws {
        // Generous: the receiver fsyncs and hashes the file before it says so (slow under load).
        let saved = await Eventually.holds { runs.contains { $0.standardOutput.contains("file: \(name) (\(contents.count) bytes") } }
        let left = (try? FileManager.default.subpathsOfDirectory(atPath: downloads.path)) ?? []
        XCTAssertTrue(saved, runs.map { $0.standardOutput + $0.standardError }.joined(separator: "\n---\n") + "\ndownloads: \(left)")
        let received = FileManager.default.contents(atPath: downloads.appendingPathComponent(name).path).map { Array($0) }
        XCTAssertEqual(received.map(FileDigest.of), FileDigest.of(contents))
    }

    /// What `runs` of `simp send --file` sent for a file of `size` bytes is at most 1.10 × size
    /// plus the largest window: the last run's summary (`sent N bytes for S …, largest window
    /// W bytes`), and for a killed earlier run its last progress line's `(sent X MB)`.
    private func assertSentAtMostTheBound(for size: Int, by runs: [ChildProcess], file: StaticString = #filePath, line: UInt = #line) {
        guard let last = runs.last, let summary = last.standardError.split(separator: "\n").last(where: { $0.hasPrefix("sent ") }) else {
            return XCTFail("no summary line: \(runs.last?.standardError.suffix(500) ?? "")", file: file, line: line)
        }
        let words = summary.split(separator: " ")
        let sent = Double(words[1]) ?? .infinity
        let window = words.firstIndex(of: "window").flatMap { Double(words[$0 + 1]) } ?? 0
        let earlier = runs.dropLast().map { run -> Double in
            let progress = run.standardError.split(separator: "\n").last { $0.contains("(sent ") } ?? ""
            return (Double(progress.split(separator: "(sent ").last?.prefix { $0 != " " } ?? "") ?? 0) * 1e6
        }
        let total = sent + earlier.reduce(0, +)
        let bound = 1.10 * Double(size) + window
        print(
            "file transfer bytes: \(Int(total)) sent for \(size) (\(String(format: "%.3f", total / Double(size)))×), bound \(Int(bound)): \(summary)")
        XCTAssertLessThanOrEqual(total, bound, String(summary), file: file, line: line)
    }
}
