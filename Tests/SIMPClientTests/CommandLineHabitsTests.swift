import Foundation
import NIOCore
import NIOPosix
import SIMPClient
import SIMPCommandLine
import SIMPCore
import SIMPTestSupport
import XCTest

/// What users and operators expect of any command line: stdin, config files, --version,
/// errors they can act on.
final class CommandLineHabitsTests: RelayTestCase {
    var server: String { "127.0.0.1:\(relay.port)" }
    var scratch: URL!

    override func setUp() async throws {
        try await super.setUp()
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("simp-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    }

    override func tearDown() async throws {
        try? FileManager.default.removeItem(at: scratch)
        try await super.tearDown()
    }

    func file(_ name: String, _ text: String) throws -> URL {
        let url = scratch.appendingPathComponent(name)
        try text.write(to: url, atomically: true, encoding: .utf8)
        return url
    }

    func credentials(_ user: String) async throws -> [String: String] {
        try await relay.addUser(user)
        return [PasswordInput.environmentVariable: TestRelay.password(for: user)]
    }

    func listen(_ user: String, count: Int) async throws -> ChildProcess {
        let listen = try ChildProcess(
            "simp", ["listen", "--no-e2e", "--server", server, "--user", user, "--json", "--count", String(count)],
            environment: try await credentials(user))
        let registered = try await Eventually.holds {
            try await self.relay.inspector.command(["EXISTS", "simp:user:{\(user)}"]).integer == 1
        }
        XCTAssertTrue(registered, listen.standardError)
        return listen
    }

    func testSendReadsStandardInputWholeOrLineByLineAndSendsAudio() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let listen = try await listen(bob, count: 4)
        let environment = try await credentials(alice)
        let base = ["send", "--no-e2e", "--server", server, "--user", alice, "--to", bob]

        let whole = try ChildProcess(
            "simp", base + ["-"], environment: environment,
            standardInput: FileHandle(forReadingFrom: try file("whole", "two lines\nin one message\n")))
        let wholeStatus = await whole.exitStatus()
        XCTAssertEqual(wholeStatus, 0, whole.standardError)
        let lines = try ChildProcess(
            "simp", base + ["--lines"], environment: environment,
            standardInput: FileHandle(forReadingFrom: try file("lines", "first\n\nsecond\n")))
        let linesStatus = await lines.exitStatus()
        XCTAssertEqual(linesStatus, 0, lines.standardError)
        XCTAssertEqual(lines.standardOutput.split(separator: "\n").filter { $0.contains(": delivered in") }.count, 2, lines.standardOutput)
        let audio = try ChildProcess("simp", base + ["--audio", "https://example.com/hi.ogg"], environment: environment)
        let audioStatus = await audio.exitStatus()
        XCTAssertEqual(audioStatus, 0, audio.standardError)

        let listenStatus = await listen.exitStatus()
        XCTAssertEqual(listenStatus, 0, listen.standardError)
        let received = listen.standardOutput.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        XCTAssertEqual(received.map { $0["content"] as? String }, ["two lines\nin one message", "first", "second", "https://example.com/hi.ogg"])
        XCTAssertEqual(received.last?["type"] as? String, "AUDIO")
        XCTAssertEqual(listen.standardError, "", "--count ends quietly: no stray offline line")
    }

    /// `tail -f build.log | simp send --lines` sends each line as it is
    /// written, not at end of input. The first line must reach the receiver while the pipe
    /// is still open and before the second line is written.
    func testSendLinesSendsEachLineAsItArrives() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let listen = try await listen(bob, count: 2)
        let pipe = Pipe()
        let send = try ChildProcess(
            "simp", ["send", "--no-e2e", "--server", server, "--user", alice, "--to", bob, "--lines"],
            environment: try await credentials(alice), standardInput: pipe.fileHandleForReading)
        pipe.fileHandleForWriting.write(Data("a\n".utf8))
        let firstArrived = await Eventually.holds {
            listen.standardOutput.contains("\"content\":\"a\"") && send.standardOutput.contains(": delivered in")
        }
        XCTAssertTrue(
            firstArrived,
            "line a not delivered while the pipe stays open\n\(send.standardOutput)\(send.standardError)\nlisten: \(listen.standardOutput)")
        XCTAssertFalse(listen.standardOutput.contains("\"content\":\"b\""))
        pipe.fileHandleForWriting.write(Data("b\n".utf8))
        try pipe.fileHandleForWriting.close()
        let sendStatus = await send.exitStatus()
        XCTAssertEqual(sendStatus, 0, send.standardError)
        let listenStatus = await listen.exitStatus()
        XCTAssertEqual(listenStatus, 0, listen.standardError)
        let contents = listen.standardOutput.split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["content"] as? String
        }
        XCTAssertEqual(contents, ["a", "b"])
        XCTAssertEqual(send.standardOutput.split(separator: "\n").filter { $0.contains(": delivered in") }.count, 2, send.standardOutput)
    }

    /// `simp listen` batches receipts as PROTOCOL §6.1 says the reference
    /// client does: 20 messages waiting in its socket (the listener paused) are receipted in
    /// far fewer than 20 frames. (With --count receipts stay single: a batch could not be
    /// withdrawn in part for the messages past the count.)
    func testListenReceiptsABurstInBatches() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let count = 20
        let listen = try ChildProcess(
            "simp", ["listen", "--no-e2e", "--server", server, "--user", bob],
            environment: try await credentials(bob))
        // Its line comes right before it takes SIGTERM as a graceful stop (a SIGTERM before
        // that ends it by the default action: status 15 under load).
        let listening = await Eventually.holds { listen.standardError.contains("listening as") }
        XCTAssertTrue(listening, listen.standardError)
        let sender = try await relay.connectClient(user: alice)
        let before = try await relay.server.statistics()
        let routedBefore = before.receiptsRouted
        listen.signal(SIGSTOP) // the burst waits in its socket and is read at once
        var results: [EventLoopFuture<SendResult>] = []
        for index in 0..<count {
            results.append(try await sender.submit(SIMPMessage(kind: .text, toUser: bob, content: "burst \(index)")).result)
        }
        let landed = try await Eventually.holds { // the burst waits in bob's socket
            try await self.relay.server.statistics().datagramsForwarded >= before.datagramsForwarded + count
        }
        XCTAssertTrue(landed, "the relay forwarded the burst")
        listen.signal(SIGCONT)
        for result in results {
            let outcome = try await result.get()
            guard case .delivered = outcome else { return XCTFail("\(outcome)") }
        }
        listen.signal(SIGTERM)
        let listenStatus = await listen.exitStatus()
        XCTAssertEqual(listenStatus, 0, listen.standardError)
        XCTAssertEqual(listen.standardOutput.split(separator: "\n").count, count, listen.standardOutput)
        let frames = try await relay.server.statistics().receiptsRouted - routedBefore
        XCTAssertLessThanOrEqual(frames, count / 3, "receipt frames for \(count) messages read as one burst")
    }

    /// `--password-file` reads a pipe (`-`, `/dev/stdin`, `<(pass show simp)`),
    /// `~` in the config file is `$HOME`, and a directory given as the config is named as such.
    func testPasswordFromAPipeTildeIsHomeAndADirectoryConfigIsNamed() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        try await relay.addUser(alice)
        let listen = try await listen(bob, count: 3)
        let password = TestRelay.password(for: alice) + "\n"
        let base = ["send", "--no-e2e", "--server", server, "--user", alice, "--to", bob]
        for file in ["-", "/dev/stdin"] {
            let send = try ChildProcess(
                "simp", base + ["--password-file", file, "from \(file)"],
                standardInput: FileHandle(forReadingFrom: try self.file("stdin", password)))
            let status = await send.exitStatus()
            XCTAssertEqual(status, 0, "--password-file \(file): \(send.standardError)")
        }
        let home = scratch.appendingPathComponent("home")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        try password.write(to: home.appendingPathComponent("pw"), atomically: true, encoding: .utf8)
        let simpHome = scratch.appendingPathComponent("simp-home")
        try FileManager.default.createDirectory(at: simpHome, withIntermediateDirectories: true)
        try "password-file = \"~/pw\"\n".write(to: simpHome.appendingPathComponent("config.toml"), atomically: true, encoding: .utf8)
        let tilde = try ChildProcess("simp", base + ["from the config"], environment: ["HOME": home.path, "SIMP_HOME": simpHome.path])
        let tildeStatus = await tilde.exitStatus()
        XCTAssertEqual(tildeStatus, 0, "~ is $HOME: \(tilde.standardError)")
        let listenStatus = await listen.exitStatus()
        XCTAssertEqual(listenStatus, 0, listen.standardError)

        let directoryHome = scratch.appendingPathComponent("dir-home")
        try FileManager.default.createDirectory(at: directoryHome.appendingPathComponent("config.toml"), withIntermediateDirectories: true)
        let directory = try ChildProcess("simp", base + ["x"], environment: ["SIMP_HOME": directoryHome.path])
        let directoryStatus = await directory.exitStatus()
        XCTAssertEqual(directoryStatus, 1)
        XCTAssertEqual(directory.standardError, "simp: \(directoryHome.path)/config.toml: is a directory, not a config file\n")
    }

    func testConfigFileGivesFlagsTypedFlagsWinAndUnknownKeysAreNamed() async throws {
        let carol = TestRelay.uniqueUser("carol"), dave = TestRelay.uniqueUser("dave"), bob = TestRelay.uniqueUser("bob")
        let listen = try await listen(bob, count: 2)
        _ = try file("config.toml", "server = \"\(server)\"\nuser = \"\(carol)\"\n\n[chat]\nbell = false\n")
        var environment = try await credentials(carol)
        environment["SIMP_HOME"] = scratch.path
        let fromFile = try ChildProcess("simp", ["send", "--no-e2e", "--to", bob, "from the file"], environment: environment)
        let fromFileStatus = await fromFile.exitStatus()
        XCTAssertEqual(fromFileStatus, 0, fromFile.standardError)
        environment.merge(try await credentials(dave)) { $1 }
        let typed = try ChildProcess("simp", ["send", "--no-e2e", "--user", dave, "--to", bob, "typed wins"], environment: environment)
        let typedStatus = await typed.exitStatus()
        XCTAssertEqual(typedStatus, 0, typed.standardError)
        let listenStatus = await listen.exitStatus()
        XCTAssertEqual(listenStatus, 0, listen.standardError)
        XCTAssertTrue(listen.standardOutput.contains("\"from\":\"\(carol)\""), listen.standardOutput)
        XCTAssertTrue(listen.standardOutput.contains("\"from\":\"\(dave)\""), listen.standardOutput)

        let config = try file("config.toml", "server = \"\(server)\"\n[chat]\ncolour = false\n")
        let wrong = try ChildProcess("simp", ["send", "--no-e2e", "--user", dave, "--to", bob, "x"], environment: environment)
        let wrongStatus = await wrong.exitStatus()
        XCTAssertEqual(wrongStatus, 1)
        XCTAssertTrue(wrong.standardError.hasPrefix("simp: \(config.path): unknown key \"colour\" in [chat]"), wrong.standardError)
    }

    /// A config value the command refuses (wrong type, out of range, not a known colour) names
    /// the file and the key, not a flag nobody typed.
    func testAConfigValueOfTheWrongTypeNamesTheFileAndTheKey() async throws {
        let cases: [(text: String, subcommand: [String], key: String)] = [
            ("udp-port = \"abc\"\n", ["send", "--no-e2e", "--to", "bob", "x"], "udp-port"),
            ("udp-port = 99999\n", ["listen"], "udp-port"),
            ("log-level = \"loud\"\n", ["send", "--no-e2e", "--to", "bob", "x"], "log-level"),
            ("[chat]\ncolors = \"peer=purple-ish\"\n", ["chat"], "chat.colors"),
        ]
        for (text, arguments, key) in cases {
            let config = try file("config.toml", "user = \"carol\"\n" + text)
            let run = try ChildProcess("simp", arguments, environment: ["SIMP_HOME": scratch.path])
            let status = await run.exitStatus()
            XCTAssertEqual(status, 1, "\(text): \(run.standardError)")
            XCTAssertTrue(run.standardError.hasPrefix("simp: \(config.path): \"\(key)\": "), "\(text): \(run.standardError)")
        }
    }
}

/// `--version`, `--help` and the relay's config, environment and start-up errors.
final class ExecutableBasicsTests: XCTestCase {
    func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) async throws -> (
        status: Int32, out: String, err: String
    ) {
        let child = try ChildProcess(executable, arguments, environment: environment)
        let status = await child.exitStatus()
        return (status ?? -1, child.standardOutput, child.standardError)
    }

    func testEveryExecutableHasVersionAndTheRelayHelpListsItsOptions() async throws {
        for executable in ["simp", "simp-server", "simp-lab", "simp-bench"] {
            let version = try await run(executable, ["--version"])
            XCTAssertEqual(version.status, 0, executable)
            XCTAssertEqual(version.out, SIMPVersion.current + "\n", executable)
        }
        let help = try await run("simp-server", ["--help"])
        XCTAssertEqual(help.status, 0)
        for option in ["--port", "--redis", "--no-login", "--config", "--inbox-ttl", "--login-timeout", "--request-rate", "--prekey-claim-rate"] {
            XCTAssertTrue(help.out.contains(option), "simp-server --help lacks \(option)")
        }
        let completion = try await run("simp", ["--generate-completion-script", "bash"])
        XCTAssertTrue(completion.out.contains("_simp()") && completion.out.contains("--history-dir"), completion.out.prefix(200) + "")
    }

    func testRelayConfigFileAndEnvironmentAreCheckedAndAPortInUseIsNamed() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-server-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let bad = directory.appendingPathComponent("relay.toml")
        try "port = 7600\nno-logn = true\n".write(to: bad, atomically: true, encoding: .utf8)
        let unknown = try await run("simp-server", ["--config", bad.path])
        XCTAssertEqual(unknown.status, 1)
        XCTAssertTrue(unknown.err.hasPrefix("simp-server: \(bad.path): unknown key \"no-logn\""), unknown.err)
        let wrongSettings = [
            ("port = \"abc\"\n", "port"), ("inbox-ttl = 0\n", "inbox-ttl"), ("login-timeout = 0\n", "login-timeout"),
            ("request-rate = \"key-fetch=fast\"\n", "request-rate"),
        ]
        for (text, key) in wrongSettings { // names the file and the key
            try text.write(to: bad, atomically: true, encoding: .utf8)
            let wrong = try await run("simp-server", ["--config", bad.path])
            XCTAssertEqual(wrong.status, 1, wrong.err)
            XCTAssertTrue(wrong.err.hasPrefix("simp-server: \(bad.path): \"\(key)\": "), wrong.err)
        }
        let badEnvironment = try await run("simp-server", ["--port", "0"], environment: ["SIMP_NO_LOGIN": "perhaps"])
        XCTAssertEqual(badEnvironment.err, "simp-server: SIMP_NO_LOGIN must be true or false, got \"perhaps\"\n")

        // Another process holds the TCP port: the relay says which, from the file's port.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let holder = try await ServerBootstrap(group: group).bind(host: "127.0.0.1", port: 0).get()
        let port = holder.localAddress!.port!
        try "port = \(port)\nudp-port = 0\n".write(to: bad, atomically: true, encoding: .utf8)
        let redis = try await RedisServerProcess.start()
        let inUse = try await run("simp-server", ["--config", bad.path], environment: ["SIMP_REDIS": redis.url.description])
        await redis.stop()
        XCTAssertEqual(inUse.status, 1)
        XCTAssertTrue(inUse.err.contains("TCP port \(port) (--port) is in use by another process"), inUse.err)
        try await holder.close()
        try await group.shutdownGracefully()
    }
}
