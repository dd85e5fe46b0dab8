import Logging
import Metrics
import NIOCore
import NIOEmbedded
import SIMPCore
import SIMPNIO
@testable import SIMPRelay

/// The relay's engine on an `EmbeddedEventLoop` with an `InMemoryRelayStore`: control
/// connections and the UDP socket are `EmbeddedChannel`s with the relay's real handlers, time
/// moves only when the test says so, and no `redis-server` is involved.
final class EmbeddedRelay {
    let loop = EmbeddedEventLoop()
    let store = InMemoryRelayStore()
    let engine: RelayEngine
    let datagrams: EmbeddedChannel
    private(set) var clients: [String: Client] = [:]
    /// Datagrams read from the channel while looking for another, not yet handed to the test.
    private var unread: [(user: String, message: SIMPMessage)] = []

    /// A user's side of the relay: its control channel, UDP address and session keys.
    struct Client {
        var control: EmbeddedChannel
        var address: SocketAddress
        var sealer: DatagramSealer
        var opener: DatagramOpener
    }

    init(configure: (inout RelayCore.Configuration) -> Void = { _ in }) throws {
        var configuration = RelayCore.Configuration(relayId: "embedded", udpPort: 7601)
        configuration.requireLogin = false
        configure(&configuration)
        let loop = self.loop
        engine = RelayEngine(
            core: RelayCore(configuration: configuration, entropy: .seeded(42), now: loop.now), store: store, eventLoop: loop,
            logger: Logger(label: "test.embedded"), metrics: RelayMetrics(factory: NOOPMetricsHandler.instance), clock: { loop.now })
        datagrams = EmbeddedChannel(loop: loop)
        try datagrams.pipeline.syncOperations.addHandler(DatagramHandler(engine: engine, maxDatagramSize: configuration.maxDatagramSize))
        engine.datagramChannel = datagrams
        engine.listening(udpPort: 7601, description: "embedded")
        loop.run()
    }

    /// Opens a control connection from 127.0.0.1:`port` (its UDP port is `port + 1`).
    func open(port: Int) throws -> EmbeddedChannel {
        let control = EmbeddedChannel(loop: loop)
        try control.pipeline.syncOperations.addSIMPControlHandlers(maxFrameSize: Framing.defaultMaxFrameSize, ControlChannelHandler(engine: engine))
        control.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: port), promise: nil)
        loop.run()
        return control
    }

    /// Connects `user` (development mode: CONNECT without login), waits for CONNECTED and says HELLO.
    func connect(_ user: String, port: Int) throws {
        let control = try open(port: port)
        var connect = SIMPMessage(kind: .connect, fromUser: user)
        connect.udpPort = UInt32(port + 1)
        try send(connect, on: control)
        let connected = try XCTUnwrapFrame(read(from: control), kind: .connected)
        let keys = SessionKeys(sessionId: connected.sessionId, secret: connected.sessionSecret)
        clients[user] = Client(
            control: control, address: try SocketAddress(ipAddress: "127.0.0.1", port: port + 1),
            sealer: DatagramSealer(keys: keys, direction: .uplink), opener: DatagramOpener(keys: keys, direction: .downlink))
        // HELLO, as a real client says it: the relay answers, and starts the user's inbox.
        try sendDatagram(SIMPMessage(kind: .hello, fromUser: user))
        var others: [(user: String, message: SIMPMessage)] = []
        while let datagram = try readDatagram(), datagram.message.kind != .hello { others.append(datagram) }
        unread = others + unread // what came with the answer (stored messages) is still to be read
    }

    /// Writes `message` as a frame on `control` and lets the loop (and the store) answer.
    func send(_ message: SIMPMessage, on control: EmbeddedChannel) throws {
        var frame = ByteBuffer()
        Framing.writeFrame(message, into: &frame)
        try control.writeInbound(frame)
        loop.run()
    }

    /// The next control message the relay wrote on `control`, if any.
    func read(from control: EmbeddedChannel) throws -> SIMPMessage? {
        guard var bytes = try control.readOutbound(as: ByteBuffer.self) else { return nil }
        guard let payload = try Framing.nextFrame(in: &bytes, maxFrameSize: Framing.defaultMaxFrameSize) else { return nil }
        return try MessageCodec.decode(payload)
    }

    /// `message` as a datagram sealed by its `fromUser`'s client, arriving from that client.
    func sendDatagram(_ message: SIMPMessage) throws {
        let sealed = clients[message.fromUser]!.sealer.seal(message)
        try datagrams.writeInbound(AddressedEnvelope(remoteAddress: clients[message.fromUser]!.address, data: sealed))
        datagrams.pipeline.fireChannelReadComplete()
        loop.run()
    }

    /// The next datagram the relay sent, opened by the client it was addressed to.
    func readDatagram() throws -> (user: String, message: SIMPMessage)? {
        if !unread.isEmpty { return unread.removeFirst() }
        guard let envelope = try datagrams.readOutbound(as: AddressedEnvelope<ByteBuffer>.self) else { return nil }
        guard let user = clients.first(where: { $0.value.address == envelope.remoteAddress })?.key else { return nil }
        let payload = try clients[user]!.opener.open(envelope.data).payload
        return (user, try MessageCodec.decode(payload))
    }

    /// Moves the loop's clock on, running what falls due.
    func advance(by amount: TimeAmount) {
        loop.advanceTime(by: amount)
        loop.run()
    }

    func control(of user: String) -> EmbeddedChannel { clients[user]!.control }
}

struct UnexpectedFrame: Error { let description: String }

/// `message`, if it is of `kind`.
func XCTUnwrapFrame(_ message: SIMPMessage?, kind: SIMPMessage.Kind) throws -> SIMPMessage {
    guard let message, message.kind == kind else { throw UnexpectedFrame(description: "expected \(kind), got \(String(describing: message))") }
    return message
}
