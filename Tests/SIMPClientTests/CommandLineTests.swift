import Foundation
import SIMPClient
import SIMPCommandLine
import SIMPCore
import SIMPLocalServers
import SIMPRedis
import SIMPTestSupport
import XCTest

/// The `simp` and `simp-server` executables, run as a user would run them.
final class CommandLineTests: RelayTestCase {
    var server: String { "127.0.0.1:\(relay.port)" }

    func waitForRegistration(of user: String) async throws -> Bool {
        try await Eventually.holds {
            try await self.relay.inspector.command(["EXISTS", "simp:user:{\(user)}"]).integer == 1
        }
    }

    /// Creates `user` and returns the environment that gives `simp` its password.
    func credentials(_ user: String) async throws -> [String: String] {
        try await relay.addUser(user)
        return [PasswordInput.environmentVariable: TestRelay.password(for: user)]
    }

    func testSendPrintsIdAndDeliveryTimeAndListenPrintsJSON() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        // bob's password from a file, alice's from the environment.
        try await relay.addUser(bob)
        let passwordFile = FileManager.default.temporaryDirectory.appendingPathComponent("simp-pw-\(bob)")
        try (TestRelay.password(for: bob) + "\n").write(to: passwordFile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: passwordFile) }
        let listen = try ChildProcess(
            "simp", ["listen", "--server", server, "--user", bob, "--password-file", passwordFile.path, "--json", "--count", "1"])
        let registered = try await waitForRegistration(of: bob)
        XCTAssertTrue(registered, listen.standardError)

        let send = try ChildProcess(
            "simp", ["send", "--server", server, "--user", alice, "--to", bob, "hello from the CLI"],
            environment: try await credentials(alice))

        let sendStatus = await send.exitStatus()
        XCTAssertEqual(sendStatus, 0, send.standardError)
        let lines = send.standardOutput.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 2, send.standardOutput)
        let id = lines.first.flatMap { $0.split(separator: " ").dropFirst().first }.flatMap { UInt64($0) }
        XCTAssertNotNil(id, lines.first ?? "")
        XCTAssertEqual(lines.first, "message \(id ?? 0) to \(bob)")
        XCTAssertTrue(lines.last?.range(of: #"^delivered in [0-9]+\.[0-9] ms$"#, options: .regularExpression) != nil, lines.last ?? "")

        let listenStatus = await listen.exitStatus()
        XCTAssertEqual(listenStatus, 0, listen.standardError)
        let json = try JSONSerialization.jsonObject(with: Data(listen.standardOutput.utf8)) as? [String: Any]
        XCTAssertEqual(json?["id"] as? UInt64, id)
        XCTAssertEqual(json?["from"] as? String, alice)
        XCTAssertEqual(json?["to"] as? String, bob)
        XCTAssertEqual(json?["type"] as? String, "TEXT")
        XCTAssertEqual(json?["content"] as? String, "hello from the CLI")
        XCTAssertNotNil(json?["time"] as? Int64)
    }

    func testSendToUnknownUserExitsNonZeroWithOneLine() async throws {
        let nobody = TestRelay.uniqueUser("nobody")
        let alice = TestRelay.uniqueUser("alice")
        let send = try ChildProcess(
            "simp", ["send", "--server", server, "--user", alice, "--to", nobody, "hi"],
            environment: try await credentials(alice))

        let status = await send.exitStatus()
        XCTAssertEqual(status, 1)
        let errorLines = send.standardError.split(separator: "\n")
        XCTAssertEqual(errorLines.count, 1, send.standardError)
        XCTAssertTrue(send.standardError.contains("no user \"\(nobody)\" is registered"), send.standardError)
    }

    func testAWrongPasswordOrNoneExitsNonZeroWithOneLine() async throws {
        let alice = TestRelay.uniqueUser("alice")
        try await relay.addUser(alice)
        let wrong = try ChildProcess(
            "simp", ["send", "--server", server, "--user", alice, "--to", "bob", "hi"],
            environment: [PasswordInput.environmentVariable: "not it"])
        let none = try ChildProcess(
            "simp", ["send", "--server", server, "--user", alice, "--to", "bob", "hi"],
            environment: [PasswordInput.environmentVariable: ""])

        let (wrongStatus, noneStatus) = (await wrong.exitStatus(), await none.exitStatus())
        XCTAssertEqual(wrongStatus, 1)
        XCTAssertEqual(wrong.standardError, "simp: relay refused: login failed: unknown user or wrong password (authFailed)\n")
        XCTAssertEqual(noneStatus, 1)
        XCTAssertTrue(none.standardError.contains("the password from SIMP_PASSWORD is empty"), none.standardError)
    }

    func testSendWithoutRelayExitsNonZeroWithOneLine() async throws {
        let closedPort = try FreePort.tcp()
        let send = try ChildProcess("simp", ["send", "--server", "127.0.0.1:\(closedPort)", "--user", "a", "--to", "b", "hi"])

        let status = await send.exitStatus()
        XCTAssertEqual(status, 1)
        XCTAssertEqual(send.standardError.split(separator: "\n").count, 1, send.standardError)
        XCTAssertEqual(send.standardError, "simp: cannot reach relay 127.0.0.1:\(closedPort) (connection refused)\n")
    }

    func testBadServerFlagIsExplained() async throws {
        let send = try ChildProcess("simp", ["send", "--server", "localhost", "--user", "a", "--to", "b", "hi"])
        let status = await send.exitStatus()
        XCTAssertNotEqual(status, 0)
        XCTAssertTrue(send.standardError.contains("--server must be HOST:PORT"), send.standardError)
    }
}

/// `simp-server` as an operator runs it.
final class ServerCommandTests: XCTestCase {
    func testServerServesAndSIGTERMRemovesItsRegistrations() async throws {
        let redis = try await RedisServerProcess.start()
        let inspector = RedisClient(url: redis.url)
        let port = try FreePort.tcp()
        let relayId = "relay-test-\(UInt32.random(in: .min ... .max))"
        let server = try ChildProcess(
            "simp-server",
            [
                "--port", String(port), "--udp-port", "0", "--redis", redis.url.description, "--relay-id", relayId,
            ])
        let started = try await Eventually.holds {
            try await inspector.command(["EXISTS", "simp:relay:\(relayId)"]).integer == 1
        }
        XCTAssertTrue(started, server.standardError)
        // The relay registers in Redis before its log line reaches our pipe: wait for the line too.
        let logged = await Eventually.holds { server.standardError.contains("relay listening") }
        XCTAssertTrue(logged, server.standardError)

        let bob = TestRelay.uniqueUser("bob")
        let add = try ChildProcess(
            "simp-server", ["user", "add", bob, "--redis", redis.url.description, "--iterations", "4096"],
            environment: [PasswordInput.environmentVariable: "bob's secret"])
        let addStatus = await add.exitStatus()
        XCTAssertEqual(addStatus, 0, add.standardError)
        XCTAssertEqual(add.standardOutput, "user \(bob) added in \(redis.url)\n")
        var configuration = ClientConfiguration(serverHost: "127.0.0.1", serverPort: port, user: bob, password: "bob's secret")
        configuration.localHost = "127.0.0.1"
        let client = SIMPClient(configuration: configuration)
        try await client.connect()
        let registered = try await inspector.command(["EXISTS", "simp:user:{\(bob)}"]).integer
        XCTAssertEqual(registered, 1)

        server.signal(SIGTERM)
        let status = await server.exitStatus()

        XCTAssertEqual(status, 0, server.standardError)
        let remaining = try await inspector.command(["EXISTS", "simp:user:{\(bob)}", "simp:relay:\(relayId)"]).integer
        XCTAssertEqual(remaining, 0, "SIGTERM must withdraw the relay's registrations")
        await client.close()
        await inspector.shutdown()
        await redis.stop()
    }

    func testUserCommandsAddListRemoveAndRefuseDuplicates() async throws {
        let redis = try await RedisServerProcess.start()
        defer { Task { await redis.stop() } }
        let user = TestRelay.uniqueUser("carol")
        func run(_ arguments: [String], password: String = "four words of carol") async throws -> (status: Int32?, out: String, err: String) {
            let process = try ChildProcess(
                "simp-server", ["user"] + arguments + ["--redis", redis.url.description],
                environment: [PasswordInput.environmentVariable: password])
            let status = await process.exitStatus()
            return (status, process.standardOutput, process.standardError)
        }

        let weak = try await run(["add", user, "--iterations", "4096"], password: "a")
        let added = try await run(["add", user, "--iterations", "4096"])
        let weakAllowed = try await run(["add", user, "--iterations", "4096", "--replace", "--allow-weak"], password: "pw")
        let again = try await run(["add", user, "--iterations", "4096"])
        let listed = try await run(["list"])
        let inspector = RedisClient(url: redis.url)
        let stored = try await inspector.command(["HGETALL", "simp:cred:{\(user)}"]).array?.compactMap(\.string) ?? []
        await inspector.shutdown()
        let removed = try await run(["remove", user])
        let removedAgain = try await run(["remove", user])

        XCTAssertEqual(weak.status, 1)
        XCTAssertEqual(
            weak.err,
            "simp-server user add: refused a weak password for \(user): it has 1 character; at least 10 are needed "
                + "(a passphrase of a few words is strong; --allow-weak accepts it anyway)\n")
        XCTAssertEqual(added.status, 0, added.err)
        XCTAssertEqual(weakAllowed.out, "password of \(user) replaced in \(redis.url)\n", weakAllowed.err)
        XCTAssertEqual(again.status, 1)
        XCTAssertEqual(again.err, "simp-server user: user \"\(user)\" already exists (use --replace to set a new password) (Redis \(redis.url))\n")
        XCTAssertTrue(listed.out.split(separator: "\n").contains(Substring(user)), listed.out) // the test Redis may hold other tests' users
        XCTAssertFalse(stored.contains("pw"), "no password in Redis: \(stored)")
        XCTAssertTrue(stored.contains("storedKey") && stored.contains("serverKey") && stored.contains("salt"), "\(stored)")
        XCTAssertEqual(removed.out, "user \(user) removed from \(redis.url)\n")
        XCTAssertEqual(removedAgain.status, 1)
        XCTAssertEqual(removedAgain.err, "simp-server user: no user \"\(user)\" (Redis \(redis.url))\n")
    }

    /// One line: where, why in plain words, and what the relay does (no NIO error text, no
    /// "retrying in the background" from a relay that exits).
    func testServerWithoutRedisExitsWithAClearMessage() async throws {
        let port = try FreePort.tcp()
        let server = try ChildProcess("simp-server", ["--port", "0", "--udp-port", "0", "--redis", "redis://127.0.0.1:\(port)"])

        let status = await server.exitStatus()

        XCTAssertEqual(status, 1)
        XCTAssertEqual(
            server.standardError,
            "simp-server: cannot reach Redis at 127.0.0.1:\(port): connection refused. Not started (exit status 1): start Redis, or pass --redis.\n")
    }
}

final class MessageFormattingTests: XCTestCase {
    func testImageJSONCarriesURLAndScale() throws {
        var image = SIMPMessage(kind: .image, messageId: 5, fromUser: "a", toUser: "b", time: 1000)
        image.imageURL = "https://example.com/cat.png"
        image.imageScale = 0.5
        let json = try JSONSerialization.jsonObject(with: Data(MessageFormatting.jsonLine(image).utf8)) as? [String: Any]
        XCTAssertEqual(json?["type"] as? String, "IMAGE")
        XCTAssertEqual(json?["imageURL"] as? String, "https://example.com/cat.png")
        XCTAssertEqual(json?["imageScale"] as? Double, 0.5)
    }

    func testConnectionStateNotices() {
        XCTAssertEqual(
            MessageFormatting.stateLine(.reconnecting(attempt: 2, delay: .milliseconds(1840))),
            "relay unreachable; reconnecting in 1.8 s (attempt 2)")
        XCTAssertEqual(MessageFormatting.stateLine(.connected(relayId: "r7")), "connected (relay r7)")
        XCTAssertNil(MessageFormatting.stateLine(.connecting))
    }

    func testServerAddressParsing() throws {
        XCTAssertEqual(try MessageFormatting.parseServer("127.0.0.1:7600").port, 7600)
        XCTAssertEqual(try MessageFormatting.parseServer("[::1]:7600").host, "::1")
        XCTAssertThrowsError(try MessageFormatting.parseServer("127.0.0.1"))
        XCTAssertThrowsError(try MessageFormatting.parseServer("host:70000"))
    }

    func testSeveralServersAreTriedInTheGivenOrder() throws {
        let servers = try MessageFormatting.parseServers("127.0.0.1:7600, [::1]:7700,relay-c:7800")
        XCTAssertEqual(
            servers,
            [
                RelayEndpoint(host: "127.0.0.1", port: 7600), RelayEndpoint(host: "::1", port: 7700),
                RelayEndpoint(host: "relay-c", port: 7800),
            ])
        let configuration = ClientConfiguration(servers: servers, user: "alice")
        XCTAssertEqual(configuration.servers, servers)
        XCTAssertEqual(configuration.serverPort, 7600)
        XCTAssertThrowsError(try MessageFormatting.parseServers("127.0.0.1:7600,"))
        XCTAssertThrowsError(try MessageFormatting.parseServers("127.0.0.1:7600,nope"))
    }
}
