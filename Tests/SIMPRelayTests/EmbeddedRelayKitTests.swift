import NIOCore
import SIMPCore
import SIMPTestKit
import XCTest

/// SIMPTestKit's `EmbeddedRelay` as the simulator and a client's tests use it: the real relay's
/// writes handed to sinks as they are flushed, the close reported once, the timer where the
/// caller can see it — through the public API only.
final class EmbeddedRelayKitTests: XCTestCase {
    private let peer = try! SocketAddress(ipAddress: "127.0.0.1", port: 40_000)
    private let udp = try! SocketAddress(ipAddress: "127.0.0.1", port: 40_001)

    func testSinksGetEachFlushedWriteAndTheCloseIsReportedOnce() throws {
        var datagramsSent: [AddressedEnvelope<ByteBuffer>] = []
        let relay = try EmbeddedRelay(configuration: EmbeddedRelay.developmentConfiguration(), datagramsSent: { datagramsSent.append($0) })
        relay.listen()
        var written: [ByteBuffer] = []
        var closes = 0
        let control = try relay.open(from: peer, written: { written.append($0) }, closed: { closes += 1 })

        var connect = SIMPMessage(kind: .connect, fromUser: "alice")
        connect.udpPort = UInt32(udp.port!)
        try relay.send(connect, on: control)
        XCTAssertEqual(written.count, 1)
        var frame = try XCTUnwrap(written.first)
        let connected = try MessageCodec.decode(XCTUnwrap(Framing.nextFrame(in: &frame, maxFrameSize: Framing.defaultMaxFrameSize)))
        XCTAssertEqual(connected.kind, .connected)
        XCTAssertEqual(frame.readableBytes, 0, "one write is one whole frame")
        XCTAssertNil(try control.readOutbound(as: ByteBuffer.self), "what went to the sink is not also left in the channel")

        var sealer = DatagramSealer(keys: SessionKeys(sessionId: connected.sessionId, secret: connected.sessionSecret), direction: .uplink)
        try relay.receiveDatagram(sealer.seal(SIMPMessage(kind: .hello, fromUser: "alice")), from: udp)
        XCTAssertEqual(datagramsSent.map(\.remoteAddress), [udp], "HELLO answered")
        XCTAssertNil(try relay.datagrams.readOutbound(as: AddressedEnvelope<ByteBuffer>.self))

        try relay.send(SIMPMessage(kind: .disconnect, fromUser: "alice"), on: control)
        control.close(promise: nil) // the relay closed it already: no second report
        XCTAssertFalse(control.isActive)
        XCTAssertEqual(closes, 1)
        XCTAssertEqual(relay.statistics.connectedUsers, 0)
    }

    func testMovingTheClockToTheTimerDeadlineRunsTheRelaysTimer() throws {
        let relay = try EmbeddedRelay { $0.heartbeat = HeartbeatPolicy(interval: .seconds(1), missLimit: 3) }
        try relay.connect("alice", port: 40_000)
        let start = relay.loop.now
        let first = try XCTUnwrap(relay.timerDeadline)

        relay.advance(to: first - .nanoseconds(1))
        XCTAssertEqual(relay.timerDeadline, first, "not run before its deadline")
        relay.advance(to: first)
        XCTAssertGreaterThan(try XCTUnwrap(relay.timerDeadline), first, "run, and armed at the core's next deadline")

        // Following the deadlines (as the simulator does) brings the heartbeat's PING.
        var pingedAt: NIODeadline?
        while pingedAt == nil, let next = relay.timerDeadline, next <= start + .seconds(2) {
            relay.advance(to: next)
            if try relay.read(from: relay.control(of: "alice"))?.kind == .ping { pingedAt = relay.loop.now }
        }
        XCTAssertNotNil(pingedAt, "a PING within two heartbeat intervals")
    }
}
