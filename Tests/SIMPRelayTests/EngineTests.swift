import NIOCore
import NIOEmbedded
import SIMPCore
import SIMPTestKit
import XCTest

@testable import SIMPRelay

/// The relay's engine and handlers with the in-memory store, on an embedded event loop: the
/// paths where a real Redis adds nothing.
final class EngineTests: XCTestCase {
    func testADatagramIsResealedForItsRecipientAndTheReceiptGoesBackToTheSender() throws {
        let relay = try EmbeddedRelay()
        try relay.connect("alice", port: 40_000)
        try relay.connect("bob", port: 41_000)
        let message = SIMPMessage(kind: .text, messageId: 1, fromUser: "alice", toUser: "bob", content: "hi")

        try relay.sendDatagram(message)

        let delivered = try XCTUnwrap(relay.readDatagram())
        XCTAssertEqual(delivered.user, "bob")
        XCTAssertEqual(delivered.message, message)
        try relay.send(message.receipt(holdMicros: 10), on: relay.control(of: "bob"))
        var expected = message.receipt(holdMicros: 10)
        expected.fromUser = "bob"
        XCTAssertEqual(try relay.read(from: relay.control(of: "alice")), expected)
        XCTAssertEqual(relay.engine.statistics.datagramsForwarded, 1)
        XCTAssertEqual(relay.engine.statistics.receiptsRouted, 1)
    }

    func testAMessageForAnOfflineUserIsStoredThenDeliveredWhenTheUserComes() throws {
        let relay = try EmbeddedRelay()
        try relay.connect("alice", port: 40_000)
        relay.store.addUser("bob", verifier: .make(password: "pw", iterations: PasswordVerifier.minimumIterations))
        let message = SIMPMessage(kind: .text, messageId: 7, fromUser: "alice", toUser: "bob", content: "later")

        try relay.sendDatagram(message)

        let stored = try unwrapFrame(relay.read(from: relay.control(of: "alice")), kind: .receipt)
        XCTAssertEqual(stored.status, .stored)
        XCTAssertEqual(relay.store.inbox(of: "bob").map(\.message), [message])
        XCTAssertEqual(relay.engine.statistics.inboxStored, 1)
        try relay.sendDatagram(message) // alice retransmits: STORED again, but stored once
        XCTAssertEqual(try unwrapFrame(relay.read(from: relay.control(of: "alice")), kind: .receipt).status, .stored)
        XCTAssertEqual(relay.engine.statistics.inboxStored, 1, "counted from the core's report, once per message")
        try relay.connect("bob", port: 41_000)
        relay.loop.run()
        XCTAssertEqual(try relay.readDatagram()?.message.content, "later")
    }

    func testAStoreThatIsDownRefusesTheRegistrationWithAClearError() throws {
        let relay = try EmbeddedRelay()
        relay.store.isAvailable = false
        let control = try relay.open(port: 40_000)
        var connect = SIMPMessage(kind: .connect, fromUser: "alice")
        connect.udpPort = 40_001

        try relay.send(connect, on: control)

        let error = try unwrapFrame(relay.read(from: control), kind: .error)
        XCTAssertEqual(error.errorCode, .internal)
        XCTAssertEqual(error.errorText, "registry unavailable, try again")
        XCTAssertEqual(relay.engine.statistics.connectedUsers, 0)
    }

    func testASilentClientIsPingedThenDroppedAndCountedOnce() throws {
        let relay = try EmbeddedRelay { $0.heartbeat = HeartbeatPolicy(interval: .seconds(1), missLimit: 3) }
        try relay.connect("alice", port: 40_000)
        let control = relay.control(of: "alice")

        relay.advance(by: .milliseconds(1_100))
        XCTAssertEqual(try relay.read(from: control)?.kind, .ping)
        relay.advance(by: .seconds(3))

        XCTAssertFalse(control.isActive, "closed by the relay")
        XCTAssertNil(relay.store.registration(of: "alice"), "its registration is withdrawn")
        relay.advance(by: .seconds(5))
        XCTAssertEqual(relay.engine.statistics.rejected[.heartbeatTimeout], 1)
    }

    func testADrainEndsWhenNoClientIsLeftAndShutdownWithdrawsEveryRegistration() throws {
        let relay = try EmbeddedRelay()
        try relay.connect("alice", port: 40_000)
        XCTAssertNotNil(relay.store.registration(of: "alice"))
        var drained = false
        relay.engine.drain().assumeIsolated().whenSuccess { drained = true }
        relay.advance(by: .milliseconds(100))
        XCTAssertFalse(drained, "a client is still connected and receipts may come")

        relay.advance(by: .milliseconds(500))
        XCTAssertTrue(drained, "no receipt for the quiet period")
        _ = relay.engine.shutDown()
        relay.loop.run()
        XCTAssertNil(relay.store.registration(of: "alice"))
        XCTAssertFalse(relay.control(of: "alice").isActive)
    }

    /// The drain goes through the engine's one path for the core's input and actions: with no
    /// client it ends at once, without waiting for a timer.
    func testADrainWithoutClientsEndsAtOnce() throws {
        let relay = try EmbeddedRelay()
        var drained = false
        relay.engine.drain().assumeIsolated().whenSuccess { drained = true }
        XCTAssertTrue(drained, "nothing to wait for")
    }
}

/// Connections the relay refuses are forgotten at once: they never count as silent later, and
/// never lock their address out.
final class RefusedConnectionTests: XCTestCase {
    func testARefusedConnectionIsForgottenAndItsAddressCanComeBack() throws {
        let relay = try EmbeddedRelay {
            $0.maxConnectionsPerHost = 1
            $0.heartbeat = HeartbeatPolicy(interval: .seconds(1), missLimit: 2)
        }
        let first = try relay.open(port: 40_000)
        let refused = try relay.open(port: 40_002)
        XCTAssertEqual(try relay.read(from: refused)?.errorCode, .rateLimited)
        XCTAssertFalse(refused.isActive)
        _ = try first.close().wait()
        relay.loop.run()

        let again = try relay.open(port: 40_004)
        XCTAssertTrue(again.isActive, "the address is not locked out")
        XCTAssertNil(try relay.read(from: again))
        relay.advance(by: .seconds(3))
        XCTAssertEqual(relay.engine.statistics.rejected[.connectionRateLimited], 1)
        XCTAssertEqual(relay.engine.statistics.rejected[.heartbeatTimeout], 1, "only the connection that was accepted and went silent")
    }
}

/// A frame of the original SIMP lineage (`float version = 1`) is answered with
/// UNSUPPORTED_VERSION and a text saying why, not "malformed".
final class LineageFrameEngineTests: XCTestCase {
    func testAnOriginalLineageConnectIsToldWhichVersionThisRelaySpeaks() throws {
        let relay = try EmbeddedRelay()
        let control = try relay.open(port: 40_000)
        // version = 1.0 as fixed32 (field 1), messageId = 7, type = CONNECT (3), fromUser "ann".
        let lineage: [UInt8] = [0x0D, 0x00, 0x00, 0x80, 0x3F, 0x10, 0x07, 0x40, 0x03, 0x32, 0x03, 0x61, 0x6E, 0x6E]
        var frame = ByteBuffer()
        frame.writeInteger(UInt32(lineage.count))
        frame.writeBytes(lineage)

        try control.writeInbound(frame)
        relay.loop.run()

        let answer = try unwrapFrame(relay.read(from: control), kind: .error)
        XCTAssertEqual(answer.errorCode, .unsupportedVersion)
        XCTAssertTrue(answer.errorText.contains("version"), answer.errorText)
        XCTAssertEqual(relay.engine.statistics.rejected[.unsupportedVersion], 1)
        XCTAssertNil(relay.engine.statistics.rejected[.malformed])
    }
}

/// A datagram above the relay's limit is dropped and counted; its session, if the header names
/// a live one, is told on its own control connection.
final class OversizedDatagramEngineTests: XCTestCase {
    func testTheSessionThatSentATooLargeDatagramIsToldWhy() throws {
        let relay = try EmbeddedRelay { $0.maxDatagramSize = 1024 }
        try relay.connect("alice", port: 40_000)
        let huge = SIMPMessage(kind: .text, messageId: 1, fromUser: "alice", toUser: "bob", content: String(repeating: "x", count: 2000))
        var sealer = relay.users["alice"]!.sealer
        let sealed = sealer.seal(huge)

        try relay.datagrams.writeInbound(AddressedEnvelope(remoteAddress: relay.users["alice"]!.address, data: sealed))
        relay.loop.run()

        let error = try unwrapFrame(relay.read(from: relay.control(of: "alice")), kind: .error)
        XCTAssertEqual(error.errorCode, .badRequest)
        XCTAssertEqual(error.errorText, "a datagram of \(sealed.readableBytes) bytes exceeds this relay's maximum of 1024 bytes")
        XCTAssertEqual(relay.engine.statistics.rejected[.datagramTooLarge], 1)
        XCTAssertNil(try relay.readDatagram(), "nothing forwarded")
    }
}
