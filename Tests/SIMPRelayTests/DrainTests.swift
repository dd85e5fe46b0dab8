import NIOCore
import NIOPosix
import SIMPClient
import SIMPCore
import SIMPRelay
import SIMPTestSupport
import XCTest

/// Shutdown drains: no new connections, receipts of datagrams already forwarded still reach
/// their senders, new datagrams are dropped, then registrations are removed.
final class DrainTests: XCTestCase {
    func testReceiptOfForwardedDatagramIsRoutedDuringDrain() async throws {
        let relay = try await TestRelay.start {
            $0.drainTimeout = .seconds(10)
            $0.drainQuietPeriod = .seconds(5) // only the clients leaving ends this drain
        }
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        // bob is a raw peer, so the test decides when his receipt goes out.
        let bobUDP = RawDatagramSocket()
        try await bobUDP.bind()
        let bobControl = RawControlConnection()
        try await bobControl.connect(port: relay.port)
        try await relay.addUser(bob)
        let bobKeys = try await bobControl.login(user: bob, password: TestRelay.password(for: bob), udpPort: bobUDP.port)
        var bobOpener = DatagramOpener(keys: bobKeys, direction: .downlink)
        let aliceClient = SIMPClient(configuration: try await relay.clientConfiguration(user: alice))
        try await aliceClient.connect()
        let (_, outcome) = try await aliceClient.submit(SIMPMessage(kind: .text, toUser: bob, content: "before shutdown"))
        let arrived = try await Eventually.holds { try await bobUDP.received().count == 1 }
        XCTAssertTrue(arrived)
        let datagram = try MessageCodec.decode(try bobOpener.open(try await bobUDP.received()[0]).payload)

        let shutdown = Task { await relay.server.shutdown() }
        let draining = try await Eventually.holds { try await relay.server.statistics().draining }
        XCTAssertTrue(draining)
        var bobSealer = DatagramSealer(keys: bobKeys, direction: .uplink)
        try await bobUDP.send(bobSealer.seal(SIMPMessage(kind: .text, messageId: 1, fromUser: bob, toUser: alice)), to: relay.server.datagramAddress!)
        let dropped = try await Eventually.holds { try await relay.server.statistics().rejected[.draining] == 1 }
        XCTAssertTrue(dropped, "a datagram arriving during the drain is dropped and counted")
        try await bobControl.send(datagram.receipt(holdMicros: 100_000))

        let result = try await outcome.get()
        guard case .delivered = result else { return XCTFail("the receipt was not routed during the drain: \(result)") }
        await aliceClient.close()
        await bobControl.close()
        await shutdown.value
        let remaining = try await relay.inspector.command(["EXISTS", "simp:user:{\(alice)}", "simp:user:{\(bob)}"]).integer
        XCTAssertEqual(remaining, 0)
        await bobUDP.close()
        await Self.cleanUp(after: relay)
    }

    func testDrainEndsAtTheTimeoutWhenReceiptsNeverCome() async throws {
        let relay = try await TestRelay.start {
            $0.drainTimeout = .milliseconds(300)
            $0.drainQuietPeriod = .seconds(60)
        }
        let bob = TestRelay.uniqueUser("bob")
        let client = SIMPClient(configuration: try await relay.clientConfiguration(user: bob))
        try await client.connect()
        let started = NIODeadline.now()
        await relay.server.shutdown()
        let took = NIODeadline.now() - started
        XCTAssertGreaterThanOrEqual(took, .milliseconds(300), "a client still connected keeps the drain open until the timeout")
        let remaining = try await relay.inspector.command(["EXISTS", "simp:user:{\(bob)}"]).integer
        XCTAssertEqual(remaining, 0)
        await client.close()
        await Self.cleanUp(after: relay)
    }

    /// The relay was shut down by the test itself; stop what remains.
    static func cleanUp(after relay: TestRelay) async {
        await relay.inspector.shutdown()
        await relay.redis.stop()
    }
}
