import NIOCore
import SIMPCore
import SIMPLocalServers
import SIMPRedis
import SIMPRelay
import SIMPTestSupport
import XCTest

/// Broken or hostile input is rejected, counted, and never stops the relay serving others.
final class BadInputTests: RelayTestCase {
    /// After whatever the test did, two fresh users can still exchange a message.
    func assertRelayStillServes() async throws {
        let bob = TestRelay.uniqueUser("bob")
        _ = try await relay.connectClient(user: bob)
        let alice = try await relay.connectClient(user: TestRelay.uniqueUser("alice"))
        let result = try await alice.send(text: "still there?", to: bob)
        guard case .delivered = result else { return XCTFail("relay stopped serving: \(result)") }
    }

    func testGarbageAndOversizedDatagramsAreCountedAndDropped() async throws {
        let udp = relay.server.datagramAddress!
        try await RawDatagram.send([0xff, 0xff, 0xff, 0x01], to: udp)
        try await RawDatagram.send([UInt8](repeating: 0x41, count: relay.server.configuration.maxDatagramSize + 1), to: udp)
        var receipt = MessageCodec.encode(SIMPMessage(kind: .receipt, messageId: 7, fromUser: "x", toUser: "y"))
        try await RawDatagram.send(receipt.readBytes(length: receipt.readableBytes)!, to: udp)
        var keepalive = MessageCodec.encode(SIMPMessage(kind: .ping, fromUser: "x"))
        try await RawDatagram.send(keepalive.readBytes(length: keepalive.readableBytes)!, to: udp)

        let counted = try await Eventually.holds {
            let rejected = try await self.relay.server.statistics().rejected
            return rejected[.unsealed] == 3 && rejected[.datagramTooLarge] == 1
        }
        let stats = try await relay.server.statistics()
        XCTAssertTrue(counted, "\(stats.rejected)")
        XCTAssertEqual(stats.rejected.values.reduce(0, +), 4, "unsealed datagrams never reach the decoder")
        XCTAssertEqual(stats.datagramsForwarded, 0)
        try await assertRelayStillServes()
    }

    func testOversizedControlFrameIsAnsweredAndClosed() async throws {
        let peer = RawControlConnection()
        defer { Task { await peer.close() } }
        try await peer.connect(port: relay.port)

        try await peer.send(bytes: [0x7f, 0xff, 0xff, 0xff, 0x00]) // announces ~2 GiB

        let closed = await Eventually.holds { peer.isClosed }
        XCTAssertTrue(closed)
        let answers = try await peer.received()
        XCTAssertEqual(answers.map(\.errorCode), [.frameTooLarge])
        try await assertRelayStillServes()
    }

    func testMalformedAndPrematureControlFramesGetErrors() async throws {
        let peer = RawControlConnection()
        defer { Task { await peer.close() } }
        try await peer.connect(port: relay.port)

        try await peer.send(bytes: [0, 0, 0, 3, 0xff, 0xff, 0xff]) // framed garbage
        try await peer.send(SIMPMessage(kind: .receipt, messageId: 9, toUser: "someone")) // before CONNECT
        var ping = SIMPMessage(kind: .ping, messageId: 42)
        ping.time = 1234
        try await peer.send(ping)

        let answered = try await Eventually.holds { try await peer.received().count == 3 }
        XCTAssertTrue(answered)
        let answers = try await peer.received()
        XCTAssertEqual(answers.map(\.kind), [.error, .error, .pong])
        XCTAssertEqual(answers.map(\.errorCode), [.badRequest, .notConnected, .none])
        XCTAssertEqual(answers.last?.messageId, 42)
        XCTAssertFalse(peer.isClosed, "a malformed frame must not cost the connection")
        try await assertRelayStillServes()
    }

    func testConnectWithoutUDPPortIsRefused() async throws {
        let peer = RawControlConnection()
        defer { Task { await peer.close() } }
        try await peer.connect(port: relay.port)
        let mallory = TestRelay.uniqueUser("mallory")
        try await relay.addUser(mallory)

        await XCTAssertThrowsErrorAsync(try await peer.login(user: mallory, password: TestRelay.password(for: mallory), udpPort: 0))

        let answer = try await peer.received().last
        XCTAssertEqual(answer?.errorCode, .badRequest)
        let exists = try await relay.inspector.command(["EXISTS", "simp:user:{\(mallory)}"]).integer
        XCTAssertEqual(exists, 0)
    }
}

/// XCTAssertThrowsError for async expressions.
// swift-format-ignore: AlwaysUseLowerCamelCase
func XCTAssertThrowsErrorAsync<T>(_ expression: @autoclosure () async throws -> T, file: StaticString = #filePath, line: UInt = #line) async {
    do {
        _ = try await expression()
        XCTFail("no error thrown", file: file, line: line)
    } catch {}
}

final class StartupTests: XCTestCase {
    func testRelayRefusesToStartWithoutRedisAndSaysWhy() async throws {
        var configuration = RelayConfiguration()
        configuration.port = 0
        configuration.udpPort = 0
        configuration.redis = RedisURL(host: "127.0.0.1", port: try FreePort.tcp())
        do {
            let relay = try await BackgroundRelay.start(configuration: configuration)
            await relay.shutdown()
            XCTFail("started without Redis")
        } catch {
            let unreachable = try XCTUnwrap((error as? RelayStartError)?.unreachableRedis, "\(error)")
            XCTAssertEqual(unreachable.address, "127.0.0.1:\(configuration.redis.port)")
            XCTAssertTrue("\(error)".hasPrefix("cannot reach Redis at 127.0.0.1:\(configuration.redis.port) ("), "\(error)")
        }
    }

    func testStatisticsAfterShutdownFailInsteadOfHanging() async throws {
        let relay = try await TestRelay.start()
        await relay.stop()
        do {
            _ = try await relay.server.statistics()
            XCTFail("statistics of a stopped relay")
        } catch is RelayStoppedError {}
    }
}
