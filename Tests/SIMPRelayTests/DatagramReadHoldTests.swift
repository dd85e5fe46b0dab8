import NIOCore
import NIOEmbedded
import SIMPClient
import SIMPCore
import SIMPTestKit
import SIMPTestSupport
import XCTest

@testable import SIMPRelay

/// `simp-server --datagram-read-hold`: after a read burst the relay's UDP socket is left unread
/// for the hold, so that datagrams arriving meanwhile share one wake-up.
final class DatagramReadHoldTests: XCTestCase {
    /// Counts the reads the handlers ask the channel for.
    private final class ReadRequests: ChannelOutboundHandler {
        typealias OutboundIn = Any
        var count = 0
        func read(context: ChannelHandlerContext) {
            count += 1
            context.read()
        }
    }

    /// The relay's `DatagramHandler` on an embedded UDP channel, behind a read counter.
    private func handler(hold: TimeAmount) throws -> (EmbeddedChannel, ReadRequests, EmbeddedRelay) {
        let relay = try EmbeddedRelay()
        let reads = ReadRequests()
        let channel = EmbeddedChannel(loop: relay.loop)
        try channel.pipeline.syncOperations.addHandler(reads)
        try channel.pipeline.syncOperations.addHandler(DatagramHandler(engine: relay.engine, maxDatagramSize: 8192, readHold: hold))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 7601)).wait()
        return (channel, reads, relay)
    }

    private func burst(of count: Int, on channel: EmbeddedChannel) throws {
        let source = try SocketAddress(ipAddress: "127.0.0.1", port: 40000)
        for _ in 0..<count {
            channel.pipeline.fireChannelRead(AddressedEnvelope(remoteAddress: source, data: ByteBuffer(bytes: [0xff, 0xff, 0xff, 0x01])))
        }
        channel.pipeline.fireChannelReadComplete()
    }

    func testWithAHoldTheNextReadIsAskedForOnlyOnceTheHoldHasPassed() throws {
        let (channel, reads, relay) = try handler(hold: .microseconds(300))
        XCTAssertEqual(reads.count, 1, "the first read is asked for when the socket is active")
        try burst(of: 3, on: channel)
        relay.advance(to: relay.loop.now + .microseconds(299))
        XCTAssertEqual(reads.count, 1, "no read during the hold: datagrams wait in the socket")
        relay.advance(to: relay.loop.now + .microseconds(1))
        XCTAssertEqual(reads.count, 2, "one read once the hold has passed")
        try burst(of: 1, on: channel)
        try burst(of: 1, on: channel)
        relay.advance(to: relay.loop.now + .microseconds(300))
        XCTAssertEqual(reads.count, 3, "bursts within one hold ask for one read")
        XCTAssertEqual(relay.engine.statistics.rejected[.unsealed], 5, "every datagram reached the relay core")
    }

    func testWithoutAHoldTheHandlerLeavesReadingToAutoRead() throws {
        let (channel, reads, relay) = try handler(hold: .zero)
        try burst(of: 3, on: channel)
        relay.advance(to: relay.loop.now + .seconds(1))
        XCTAssertEqual(reads.count, 0)
    }

    /// A real relay with a hold on real sockets and Redis: every message and receipt still
    /// goes through, a burst of them sent at once included.
    func testARelayWithAHoldDeliversEveryMessage() async throws {
        let relay = try await TestRelay.start { $0.datagramReadHold = .milliseconds(2) }
        do {
            let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
            let bobClient = try await relay.connectClient(user: bob)
            let inbox = MessageInbox(bobClient)
            let aliceClient = try await relay.connectClient(user: alice)
            try await withThrowingTaskGroup(of: SendResult.self) { group in
                for index in 0..<50 { group.addTask { try await aliceClient.send(text: "m\(index)", to: bob) } }
                for try await result in group {
                    guard case .delivered = result else { return XCTFail("\(result)") }
                }
            }
            let arrived = await inbox.waitFor(50)
            XCTAssertTrue(arrived)
            let texts = Set(await inbox.messages.map(\.content))
            XCTAssertEqual(texts, Set((0..<50).map { "m\($0)" }))
        } catch {
            await relay.stop()
            throw error
        }
        await relay.stop()
    }
}
