import NIOCore
import NIOPosix

/// A UDP proxy on loopback that forwards each datagram to `target` as many times as `copies`
/// says: 0 drops it, 2 duplicates it. Put it between a client and the relay
/// (`ClientConfiguration.datagramTarget`) to lose or repeat chosen datagrams on purpose.
public final class DatagramProxy: @unchecked Sendable {
    public let channel: Channel
    public var address: SocketAddress { channel.localAddress! }
    private let group: MultiThreadedEventLoopGroup
    private let handler: Handler

    /// - Parameter copies: called with each datagram's bytes and its 1-based index; runs on the
    ///   proxy's event loop.
    public static func start(target: SocketAddress, copies: @escaping @Sendable (ByteBuffer, Int) -> Int) async throws -> DatagramProxy {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let handler = Handler(target: target, copies: copies)
        let channel = try await DatagramBootstrap(group: group)
            .channelInitializer { $0.pipeline.addHandler(handler) }
            .bind(host: "127.0.0.1", port: 0).get()
        return DatagramProxy(channel: channel, group: group, handler: handler)
    }

    private init(channel: Channel, group: MultiThreadedEventLoopGroup, handler: Handler) {
        self.channel = channel
        self.group = group
        self.handler = handler
    }

    /// Datagrams seen and dropped so far.
    public func counts() async throws -> (seen: Int, dropped: Int) {
        try await channel.eventLoop.submit { [handler] in (handler.seen, handler.dropped) }.get()
    }

    public func stop() async {
        try? await channel.close()
        try? await group.shutdownGracefully()
    }

    private final class Handler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = AddressedEnvelope<ByteBuffer>
        typealias OutboundOut = AddressedEnvelope<ByteBuffer>
        let target: SocketAddress
        let copies: @Sendable (ByteBuffer, Int) -> Int
        var seen = 0
        var dropped = 0

        init(target: SocketAddress, copies: @escaping @Sendable (ByteBuffer, Int) -> Int) {
            self.target = target
            self.copies = copies
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let envelope = unwrapInboundIn(data)
            seen += 1
            let count = copies(envelope.data, seen)
            if count == 0 { dropped += 1 }
            for _ in 0..<count {
                context.write(wrapOutboundOut(AddressedEnvelope(remoteAddress: target, data: envelope.data)), promise: nil)
            }
            context.flush()
        }
    }
}
