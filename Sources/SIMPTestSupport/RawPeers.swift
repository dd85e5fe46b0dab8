import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SIMPCore
import SIMPNIO

/// A bare TCP connection to a relay's control port that sends arbitrary bytes and records
/// the frames the relay answers with, for tests of hostile or broken peers.
public final class RawControlConnection: @unchecked Sendable { // `channel` is set once, by `connect`, before use
    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    private let collector = Collector()
    private var channel: Channel!

    /// A connection not yet made (`connect`).
    public init() {}

    /// Connects to the relay on 127.0.0.1:`port`, from `source` (another loopback address plays
    /// another machine; Linux answers on all of 127.0.0.0/8).
    public func connect(port: Int, from source: String = "127.0.0.1") async throws {
        channel = try await ClientBootstrap(group: group)
            .bind(to: try SocketAddress(ipAddress: source, port: 0))
            .channelInitializer { [collector] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([
                        ByteToMessageHandler(FrameDecoder()), collector,
                    ])
                }
            }
            .connect(host: "127.0.0.1", port: port).get()
    }

    /// Sends raw bytes as they are.
    public func send(bytes: [UInt8]) async throws {
        try await channel.writeAndFlush(channel.allocator.buffer(bytes: bytes))
    }

    /// Sends `message` as one well-formed frame.
    public func send(_ message: SIMPMessage) async throws {
        var buffer = channel.allocator.buffer(capacity: 64)
        Framing.writeFrame(message, into: &buffer)
        try await channel.writeAndFlush(buffer)
    }

    /// Sends `messages` as well-formed frames in one write.
    public func send(_ messages: [SIMPMessage]) async throws {
        var buffer = channel.allocator.buffer(capacity: 64 * messages.count)
        for message in messages { Framing.writeFrame(message, into: &buffer) }
        try await channel.writeAndFlush(buffer)
    }

    /// Frames received so far, decoded.
    public func received() async throws -> [SIMPMessage] {
        collector.messages.withLockedValue { $0 }
    }

    /// The first frame received of `kind`, waiting up to 3 s.
    public func first(_ kind: SIMPMessage.Kind) async throws -> SIMPMessage? {
        var found: SIMPMessage?
        _ = try await Eventually.holds {
            found = try await received().first { $0.kind == kind }
            return found != nil
        }
        return found
    }

    /// Logs in as `user` (AUTH, CHALLENGE, CONNECT with proof) registering `udpPort`, for
    /// `device` (send-only if `sendOnly`), and returns the session's keys; throws with the
    /// relay's answer if it refuses.
    @discardableResult
    public func login(
        user: String, password: String?, udpPort: Int, device: String = "", sendOnly: Bool = false, acceptsBatchReceipts: Bool = true
    ) async throws -> SessionKeys {
        var client = LoginClient(user: user, password: password)
        var (auth, nonce) = client.start()
        auth.device = device
        try await send(auth)
        guard let challenge = try await first(.challenge) else { throw RawPeerError("no CHALLENGE: \(try await received())") }
        var answer = try client.answer(challenge, clientNonce: nonce, udpPort: udpPort)
        answer.frame.device = device
        answer.frame.sendOnly = sendOnly
        answer.frame.acceptsBatchReceipts = acceptsBatchReceipts
        try await send(answer.frame)
        _ = try await Eventually.holds { try await received().contains { $0.kind == .connected || $0.kind == .error } }
        guard let connected = try await received().first(where: { $0.kind == .connected }) else {
            throw RawPeerError("login refused: \(try await received())")
        }
        return try client.accept(connected, transcript: answer.transcript)
    }

    /// Whether the relay has closed the connection.
    public var isClosed: Bool { !channel.isActive }

    /// Closes the connection and stops its event loop.
    public func close() async {
        try? await channel?.close()
        try? await group.shutdownGracefully()
    }

    /// Keeps every decoded frame; read from outside the loop, hence the lock.
    private final class Collector: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let messages = NIOLockedValueBox<[SIMPMessage]>([])
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if let message = try? MessageCodec.decode(unwrapInboundIn(data)) { messages.withLockedValue { $0.append(message) } }
        }
        func errorCaught(context: ChannelHandlerContext, error: Error) { context.close(promise: nil) }
    }
}

/// Why a raw peer could not do what a test asked.
public struct RawPeerError: Error, CustomStringConvertible {
    /// What the peer could not do.
    public let description: String
    /// An error saying `description`.
    public init(_ description: String) { self.description = description }
}

/// A UDP socket on loopback that sends raw bytes and keeps what arrives, for tests that
/// play a client's data path by hand (sealed or forged datagrams, address changes).
public final class RawDatagramSocket: @unchecked Sendable { // `channel` is set once, by `bind`, before use
    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    private let collector = Collector()
    /// The bound socket (after `bind`).
    public private(set) var channel: Channel!

    /// A socket not yet bound (`bind`).
    public init() {}

    /// Binds a free loopback port.
    public func bind() async throws {
        channel = try await DatagramBootstrap(group: group)
            .channelInitializer { [collector] in $0.pipeline.addHandler(collector) }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    /// The loopback port it is bound to.
    public var port: Int { channel.localAddress!.port! }

    /// Sends `bytes` as one datagram to `address`.
    public func send(_ bytes: ByteBuffer, to address: SocketAddress) async throws {
        try await channel.writeAndFlush(AddressedEnvelope(remoteAddress: address, data: bytes))
    }

    /// Sends `datagrams` to `address`, flushed once at the end.
    public func send(_ datagrams: [ByteBuffer], to address: SocketAddress) async throws {
        let channel: Channel = self.channel
        try await channel.eventLoop.submit {
            for datagram in datagrams { channel.write(AddressedEnvelope(remoteAddress: address, data: datagram), promise: nil) }
            channel.flush()
        }.get()
    }

    /// Datagrams received so far.
    public func received() async throws -> [ByteBuffer] {
        collector.datagrams.withLockedValue { $0 }
    }

    /// Closes the socket and stops its event loop.
    public func close() async {
        try? await channel?.close()
        try? await group.shutdownGracefully()
    }

    /// Keeps every datagram; read from outside the loop, hence the lock.
    private final class Collector: ChannelInboundHandler, Sendable {
        typealias InboundIn = AddressedEnvelope<ByteBuffer>
        let datagrams = NIOLockedValueBox<[ByteBuffer]>([])
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let datagram = unwrapInboundIn(data).data
            datagrams.withLockedValue { $0.append(datagram) }
        }
    }
}

/// Sends raw UDP datagrams, e.g. garbage to a relay's data port.
public enum RawDatagram {
    /// Sends `bytes` as one datagram to `address` from a new loopback socket, closed afterwards.
    public static func send(_ bytes: [UInt8], to address: SocketAddress) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let channel = try await DatagramBootstrap(group: group).bind(host: "127.0.0.1", port: 0).get()
        try await channel.writeAndFlush(AddressedEnvelope(remoteAddress: address, data: channel.allocator.buffer(bytes: bytes)))
        try await channel.close()
        try await group.shutdownGracefully()
    }
}
