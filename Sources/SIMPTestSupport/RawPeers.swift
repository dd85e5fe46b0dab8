import NIOCore
import NIOPosix
import SIMPCore

/// A bare TCP connection to a relay's control port that sends arbitrary bytes and records
/// the frames the relay answers with, for tests of hostile or broken peers.
public final class RawControlConnection: @unchecked Sendable {
    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    private let collector = Collector()
    private var channel: Channel!

    public init() {}

    public func connect(port: Int) async throws {
        channel = try await ClientBootstrap(group: group)
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

    /// Frames received so far, decoded.
    public func received() async throws -> [SIMPMessage] {
        try await channel.eventLoop.submit { [collector] in collector.messages }.get()
    }

    /// Whether the relay has closed the connection.
    public var isClosed: Bool { !channel.isActive }

    public func close() async {
        try? await channel?.close()
        try? await group.shutdownGracefully()
    }

    private final class Collector: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        var messages: [SIMPMessage] = []
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if let message = try? MessageCodec.decode(unwrapInboundIn(data)) { messages.append(message) }
        }
        func errorCaught(context: ChannelHandlerContext, error: Error) { context.close(promise: nil) }
    }
}

/// Sends raw UDP datagrams, e.g. garbage to a relay's data port.
public enum RawDatagram {
    public static func send(_ bytes: [UInt8], to address: SocketAddress) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let channel = try await DatagramBootstrap(group: group).bind(host: "127.0.0.1", port: 0).get()
        try await channel.writeAndFlush(AddressedEnvelope(remoteAddress: address, data: channel.allocator.buffer(bytes: bytes)))
        try await channel.close()
        try await group.shutdownGracefully()
    }
}
