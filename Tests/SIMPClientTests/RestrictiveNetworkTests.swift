import Foundation
import NIOCore
import NIOPosix
import SIMPClient
import SIMPCommandLine
import SIMPLocalServers
import SIMPRelay
import SIMPTestSupport
import XCTest

/// Restrictive networks: one relay listens on several control ports (`simp-server
/// --port 7600 --port 443`), the UDP port stays the first one's + 1 (CONNECTED tells the
/// client), and a client given a list of addresses tries them in order, moving on when a
/// connection is refused or the login gets no answer.
final class RestrictiveNetworkTests: StoryProcessTestCase {
    override func configureRelay(_ configuration: inout RelayConfiguration) {
        configuration.additionalPorts = [0]
    }

    /// The relay's second control port.
    var secondPort: Int { relay.server.addresses.additionalControl[0].port! }

    func testClientsOnEitherControlPortReachEachOther() async throws {
        XCTAssertEqual(relay.server.addresses.additionalControl.count, 1)
        XCTAssertNotEqual(secondPort, relay.port)
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let aliceClient = try await relay.connectClient(user: alice) // the first port
        let bobClient = try await relay.connectClient(user: bob) { $0.serverPort = self.secondPort }

        let toBob = try await aliceClient.send(text: "via the first port", to: bob)
        guard case .delivered = toBob else { return XCTFail("\(toBob)") }
        let toAlice = try await bobClient.send(text: "via the second port", to: alice)
        guard case .delivered = toAlice else { return XCTFail("\(toAlice)") }
    }

    /// With --threads every relay core listens on every control port.
    func testEveryRelayCoreListensOnEveryControlPort() async throws {
        let threaded = try await TestRelay.start(redis: relay.redis) { configuration in
            configuration.additionalPorts = [0]
            configuration.threads = 2
        }
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let second = threaded.server.addresses.additionalControl[0].port!
        var clients: [SIMPClient] = []
        for index in 0..<4 { // connections are spread over the cores by the kernel
            clients.append(try await threaded.connectClient(user: "\(alice)-\(index)") { $0.serverPort = second })
        }
        let bobClient = try await threaded.connectClient(user: bob)
        for client in clients {
            let result = try await client.send(text: "from the second port", to: bob)
            guard case .delivered = result else { return XCTFail("\(result)") }
        }
        _ = bobClient
        await threaded.stopKeepingRedis()
    }

    func testAClientWhoseFirstPortIsClosedGetsThroughOnTheSecond() async throws {
        let closed = try FreePort.tcp()
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let bobClient = try await relay.connectClient(user: bob)
        let aliceClient = try await relay.connectClient(user: alice) { configuration in
            configuration.serverPort = closed
            configuration.fallbackServers = [RelayEndpoint(host: "127.0.0.1", port: self.secondPort)]
        }
        let relayId = await aliceClient.relayId
        XCTAssertEqual(relayId, relay.server.configuration.relayId)
        let result = try await aliceClient.send(text: "through 443", to: bob)
        guard case .delivered = result else { return XCTFail("\(result)") }
        _ = bobClient
    }

    /// A middlebox that accepts the connection and then passes nothing: the login times out and
    /// the client moves on.
    func testAClientWhoseFirstPortSwallowsTheLoginMovesOnToTheNext() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let blackHole = try await ServerBootstrap(group: group).bind(host: "127.0.0.1", port: 0).get()
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let bobClient = try await relay.connectClient(user: bob)
        let aliceClient = try await relay.connectClient(user: alice) { configuration in
            configuration.serverPort = blackHole.localAddress!.port!
            configuration.fallbackServers = [RelayEndpoint(host: "127.0.0.1", port: self.secondPort)]
            configuration.connectTimeout = .milliseconds(500)
        }
        let result = try await aliceClient.send(text: "past the black hole", to: bob)
        guard case .delivered = result else { return XCTFail("\(result)") }
        _ = bobClient
        try await blackHole.close()
        try await group.shutdownGracefully()
    }

    func testSimpServerOnTwoPortsAndSimpSendThroughTheSecondWhenTheFirstIsClosed() async throws {
        let first = try FreePort.tcp(), second = try FreePort.tcp(), udpPort = try FreePort.udp(), closed = try FreePort.tcp()
        let server = try await startServer([
            "--port", String(first), "--port", String(second), "--udp-port", String(udpPort),
            "--redis", relay.redis.url.description, "--relay-id", "ports-\(UInt32.random(in: .min ... .max))",
        ])
        XCTAssertTrue(server.standardError.contains("tcp=127.0.0.1:\(first),127.0.0.1:\(second)"), server.standardError)
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        // bob names the ports with a repeated --server, alice with a comma-separated list.
        let listen = try ChildProcess(
            "simp", ["listen", "--server", "127.0.0.1:\(closed)", "--server", "127.0.0.1:\(second)", "--user", bob],
            environment: try await environment(bob))
        children.append(listen)
        let listening = await Eventually.holds { listen.standardError.contains("listening as") }
        XCTAssertTrue(listening, listen.standardError)

        let send = try ChildProcess(
            "simp", ["send", "--server", "127.0.0.1:\(closed),127.0.0.1:\(second)", "--user", alice, "--to", bob, "hello past the firewall"],
            environment: try await environment(alice))
        children.append(send)
        let status = await send.exitStatus()
        XCTAssertEqual(status, 0, send.standardError)
        XCTAssertTrue(send.standardOutput.contains("delivered"), send.standardOutput)
        XCTAssertTrue(
            send.standardError.contains("cannot reach relay 127.0.0.1:\(closed) (connection refused); trying 127.0.0.1:\(second)"),
            send.standardError)
        let printed = await Eventually.holds { listen.standardOutput.contains("hello past the firewall") }
        XCTAssertTrue(printed, listen.standardOutput + listen.standardError)
    }

    func testNoAddressReachableNamesEachWithItsReason() async throws {
        let first = try FreePort.tcp(), second = try FreePort.tcp()
        let send = try ChildProcess("simp", ["send", "--server", "127.0.0.1:\(first),127.0.0.1:\(second)", "--user", "a", "--to", "b", "hi"])
        let status = await send.exitStatus()
        XCTAssertEqual(status, 1)
        let lines = send.standardError.split(separator: "\n").map(String.init)
        XCTAssertEqual(
            lines.last, "simp: cannot reach relay 127.0.0.1:\(first) (connection refused) nor 127.0.0.1:\(second) (connection refused)",
            send.standardError)
    }

    /// The UDP port is the first control port + 1, so a second control port there is refused
    /// (unless --udp-port moves it), and so is a port given twice.
    func testSimpServerRefusesAControlPortOnItsUDPPortOrTwice() async throws {
        let onUDP = try ChildProcess("simp-server", ["--port", "7600", "--port", "7601"])
        let onUDPStatus = await onUDP.exitStatus()
        XCTAssertNotEqual(onUDPStatus, 0)
        XCTAssertTrue(onUDP.standardError.contains("--port 7601 is the UDP port (the first --port + 1)"), onUDP.standardError)
        let twice = try ChildProcess("simp-server", ["--port", "7600,443,7600"])
        let twiceStatus = await twice.exitStatus()
        XCTAssertNotEqual(twiceStatus, 0)
        XCTAssertTrue(twice.standardError.contains("each control port once, got 7600,443,7600"), twice.standardError)
    }

    /// `port = [A, B]` in a config file listens on both; a typed --port replaces the file's
    /// ports rather than adding to them.
    func testConfigFilePortListAndATypedPortReplacesIt() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-ports-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("relay.toml")
        let first = try FreePort.tcp(), second = try FreePort.tcp(), typed = try FreePort.tcp()
        try "port = [\(first), \(second)]\nudp-port = 0\nredis = \"\(relay.redis.url)\"\n".write(to: file, atomically: true, encoding: .utf8)
        let fromFile = try await startServer(["--config", file.path, "--relay-id", "file-\(UInt32.random(in: .min ... .max))"])
        XCTAssertTrue(fromFile.standardError.contains("tcp=127.0.0.1:\(first),127.0.0.1:\(second) "), fromFile.standardError)
        let overridden = try await startServer([
            "--config", file.path, "--port", String(typed), "--relay-id", "typed-\(UInt32.random(in: .min ... .max))",
        ])
        XCTAssertTrue(overridden.standardError.contains("tcp=127.0.0.1:\(typed) "), overridden.standardError)
    }

    func testRepeatableSettingsAreReplacedByTypedOnes() {
        let settings = ["--port", "7600", "--redis", "redis://r", "--port=443", "--no-login"]
        XCTAssertEqual(
            ConfigFile.overridden(settings, by: ["--port", "8000"], repeatable: ["--port"]), ["--redis", "redis://r", "--no-login"])
        XCTAssertEqual(ConfigFile.overridden(settings, by: ["--port=8000"], repeatable: ["--port"]), ["--redis", "redis://r", "--no-login"])
        XCTAssertEqual(ConfigFile.overridden(settings, by: ["--redis", "x"], repeatable: ["--port"]), settings)
    }
}
