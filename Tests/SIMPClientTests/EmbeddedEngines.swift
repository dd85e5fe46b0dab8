import NIOCore
import NIOEmbedded
import SIMPCore
import SIMPTestKit

@testable import SIMPClient

/// Client engines on the loop of an `EmbeddedRelay`, through their `Environment`: each control
/// connection and UDP socket is an `EmbeddedChannel` with the engine's real handlers, the bytes
/// either end writes wait until `pump` hands them over, and time moves only when a test says.
final class EmbeddedEngines {
    let relay: EmbeddedRelay
    var loop: EmbeddedEventLoop { relay.loop }
    /// Bytes written and not yet handed to the other end.
    private var toRelay: [(channel: EmbeddedChannel, bytes: ByteBuffer)] = []
    private var toClients: [(channel: EmbeddedChannel, bytes: ByteBuffer)] = []
    private var datagramsToRelay: [(from: SocketAddress, bytes: ByteBuffer)] = []
    private var datagramsToClients: [AddressedEnvelope<ByteBuffer>] = []
    private var socketsByAddress: [SocketAddress: EmbeddedChannel] = [:]
    /// Says whether a datagram a client sent reaches the relay (a test drops some).
    var passes: (_ from: SocketAddress, _ bytes: ByteBuffer) -> Bool = { _, _ in true }

    /// `configure` changes the development relay's settings.
    init(relay configure: (inout RelayCore.Configuration) -> Void = { _ in }) throws {
        var pending: [AddressedEnvelope<ByteBuffer>] = []
        var configuration = EmbeddedRelay.developmentConfiguration()
        configure(&configuration)
        relay = try EmbeddedRelay(configuration: configuration, datagramsSent: { pending.append($0) })
        relay.listen()
        relayDatagrams = {
            defer { pending.removeAll() }; return pending
        }
    }

    private var relayDatagrams: () -> [AddressedEnvelope<ByteBuffer>] = { [] }

    /// An engine for `user` (UDP port 50000 on 10.0.0.`host`), not connected yet.
    /// `configure` changes its settings.
    func engine(
        user: String, host: Int, firstMessageId: UInt64, _ configure: (inout ClientConfiguration) -> Void = { _ in }
    ) throws -> ClientEngine {
        var configuration = ClientConfiguration(serverHost: "127.0.0.1", serverPort: 7600, user: user)
        configuration.advertisedUDPPort = 50_000
        configure(&configuration)
        let udpAddress = try SocketAddress(ipAddress: "10.0.0.\(host)", port: 50_000)
        let controlAddress = try SocketAddress(ipAddress: "10.0.0.\(host)", port: 40_000)
        let environment = ClientEngine.Environment(
            connect: { [unowned self] _, _, initialize in
                self.connect(from: controlAddress, initialize)
            },
            now: { [loop] in loop.now }, wallClockMillis: { 1_700_000_000_000 }, random: { 0.5 }, firstMessageId: firstMessageId)
        let engine = ClientEngine(configuration: configuration, eventLoop: loop, environment: environment)
        let socket = EmbeddedChannel(loop: loop)
        try socket.pipeline.syncOperations.addHandler(
            OutboundTap<AddressedEnvelope<ByteBuffer>>(written: { [unowned self] in datagramsToRelay.append((udpAddress, $0.data)) }))
        try socket.pipeline.syncOperations.addHandler(ClientDatagramHandler(engine: engine))
        engine.datagrams = socket
        socketsByAddress[udpAddress] = socket
        return engine
    }

    /// The engine's connect: a channel set up by the engine, whose peer is a relay connection.
    private func connect(from peer: SocketAddress, _ initialize: (Channel) -> EventLoopFuture<Void>) -> EventLoopFuture<Channel> {
        let channel = EmbeddedChannel(loop: loop)
        var relayEnd: EmbeddedChannel?
        relayEnd = try! relay.open(from: peer, written: { [unowned self] in toClients.append((channel, $0)) })
        try! channel.pipeline.syncOperations.addHandler(
            OutboundTap<ByteBuffer>(written: { [unowned self] in toRelay.append((relayEnd!, $0)) }))
        return initialize(channel).flatMap { [loop] in
            channel.connect(to: try! SocketAddress(ipAddress: "10.0.0.254", port: 7600), promise: nil)
            return loop.makeSucceededFuture(channel)
        }
    }

    /// Hands over everything written, until nothing more is; each datagram is a read burst
    /// of its own.
    func pump() throws {
        while true {
            loop.run()
            datagramsToClients += relayDatagrams()
            if !toRelay.isEmpty {
                let (channel, bytes) = toRelay.removeFirst()
                try relay.receive(bytes, on: channel)
            } else if !toClients.isEmpty {
                let (channel, bytes) = toClients.removeFirst()
                try channel.writeInbound(bytes)
            } else if !datagramsToRelay.isEmpty {
                let (from, bytes) = datagramsToRelay.removeFirst()
                if passes(from, bytes) { try relay.receiveDatagram(bytes, from: from) }
            } else if !datagramsToClients.isEmpty {
                let envelope = datagramsToClients.removeFirst()
                try socketsByAddress[envelope.remoteAddress]?.writeInbound(envelope)
            } else {
                return
            }
        }
    }

    /// Moves time on by `amount` (timers due meanwhile fire), then pumps.
    func advance(by amount: TimeAmount) throws {
        loop.advanceTime(by: amount)
        try pump()
    }
}
