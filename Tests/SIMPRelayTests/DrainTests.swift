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
        let bobUDP = try await DatagramCollector.bind()
        let bobControl = RawControlConnection()
        try await bobControl.connect(port: relay.port)
        var connect = SIMPMessage(kind: .connect, fromUser: bob)
        connect.udpPort = UInt32(bobUDP.port)
        try await bobControl.send(connect)
        let connected = try await Eventually.holds { try await bobControl.received().contains { $0.kind == .connected } }
        XCTAssertTrue(connected)
        let aliceClient = SIMPClient(configuration: relay.clientConfiguration(user: alice))
        try await aliceClient.connect()
        let (_, outcome) = try await aliceClient.submit(SIMPMessage(kind: .text, toUser: bob, content: "before shutdown"))
        let arrived = try await Eventually.holds { try await bobUDP.messages().count == 1 }
        XCTAssertTrue(arrived)
        let datagram = try await bobUDP.messages()[0]

        let shutdown = Task { await relay.server.shutdown() }
        try await Task.sleep(nanoseconds: 100_000_000)
        try await RawDatagram.send(Array(MessageCodec.encode(datagram).readableBytesView), to: relay.server.datagramAddress!)
        let dropped = try await Eventually.holds { try await relay.server.statistics().rejected[.draining] == 1 }
        XCTAssertTrue(dropped, "a datagram arriving during the drain is dropped and counted")
        try await bobControl.send(datagram.receipt(holdMicros: 100_000))

        let result = try await outcome.get()
        guard case .delivered = result else { return XCTFail("the receipt was not routed during the drain: \(result)") }
        await aliceClient.close()
        await bobControl.close()
        await shutdown.value
        let remaining = try await relay.inspector.command(["EXISTS", "simp:user:\(alice)", "simp:user:\(bob)"]).integer
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
        let client = SIMPClient(configuration: relay.clientConfiguration(user: bob))
        try await client.connect()
        let started = NIODeadline.now()
        await relay.server.shutdown()
        let took = NIODeadline.now() - started
        XCTAssertGreaterThanOrEqual(took, .milliseconds(300), "a client still connected keeps the drain open until the timeout")
        let remaining = try await relay.inspector.command(["EXISTS", "simp:user:\(bob)"]).integer
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

/// A UDP socket that decodes and keeps every datagram it receives.
final class DatagramCollector: @unchecked Sendable {
    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    private let handler = Handler()
    private var channel: Channel!
    var port: Int { channel.localAddress!.port! }

    static func bind() async throws -> DatagramCollector {
        let collector = DatagramCollector()
        collector.channel = try await DatagramBootstrap(group: collector.group)
            .channelInitializer { [handler = collector.handler] in $0.pipeline.addHandler(handler) }
            .bind(host: "127.0.0.1", port: 0).get()
        return collector
    }

    func messages() async throws -> [SIMPMessage] {
        try await channel.eventLoop.submit { [handler] in handler.messages }.get()
    }

    func close() async {
        try? await channel.close()
        try? await group.shutdownGracefully()
    }

    private final class Handler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = AddressedEnvelope<ByteBuffer>
        var messages: [SIMPMessage] = []
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if let message = try? MessageCodec.decode(unwrapInboundIn(data).data) { messages.append(message) }
        }
    }
}
