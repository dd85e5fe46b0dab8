import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A UDP proxy on loopback that forwards each content datagram (TEXT, IMAGE, AUDIO) to `target`
/// as many times as `copies` says: 0 drops it, 2 duplicates it. Other datagrams (HELLO,
/// keepalives) pass unchanged and uncounted, and the target's datagrams go back to the client,
/// like a NAT. Datagrams are encrypted, so the proxy tells them apart by length, as any
/// on-path observer could: the client's first datagram is its HELLO, and its keepalive PINGs
/// have the same length (both carry only version, type and user); content datagrams are longer.
/// Put it between a client and the relay (`ClientConfiguration.datagramTarget`) to lose or
/// repeat chosen messages on purpose.
public final class DatagramProxy: Sendable {
    /// The proxy's UDP socket.
    public let channel: Channel
    /// Where the client sends its datagrams instead of the relay.
    public var address: SocketAddress { channel.localAddress! }
    private let group: MultiThreadedEventLoopGroup
    private let handler: Handler

    /// - Parameter copies: called with each content datagram's bytes and its 1-based index; runs
    ///   on the proxy's event loop.
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

    /// Every datagram passed so far, both ways, concatenated: what an on-path observer sees.
    public func recordedBytes() async throws -> [UInt8] {
        handler.state.withLockedValue { $0.wire }
    }

    /// Content datagrams seen and dropped so far.
    public func counts() async throws -> (seen: Int, dropped: Int) {
        handler.state.withLockedValue { ($0.seen, $0.dropped) }
    }

    /// Closes the socket and stops the proxy's event loop.
    public func stop() async {
        try? await channel.close()
        try? await group.shutdownGracefully()
    }

    private final class Handler: ChannelInboundHandler, Sendable {
        typealias InboundIn = AddressedEnvelope<ByteBuffer>
        typealias OutboundOut = AddressedEnvelope<ByteBuffer>
        struct State {
            var seen = 0
            var dropped = 0
            var client: SocketAddress?
            /// Every datagram passed, both ways.
            var wire: [UInt8] = []
            /// The length of the client's HELLO.
            var helloLength: Int?
        }
        let target: SocketAddress
        let copies: @Sendable (ByteBuffer, Int) -> Int
        /// Written on the loop, counts read by the test, hence the lock.
        let state = NIOLockedValueBox(State())

        init(target: SocketAddress, copies: @escaping @Sendable (ByteBuffer, Int) -> Int) {
            self.target = target
            self.copies = copies
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let envelope = unwrapInboundIn(data)
            state.withLockedValue { $0.wire += envelope.data.readableBytesView }
            if envelope.remoteAddress == target {
                guard let client = state.withLockedValue({ $0.client }) else { return }
                return context.writeAndFlush(wrapOutboundOut(AddressedEnvelope(remoteAddress: client, data: envelope.data)), promise: nil)
            }
            let length = envelope.data.readableBytes
            let helloLength = state.withLockedValue { state in
                state.client = envelope.remoteAddress
                if state.helloLength == nil { state.helloLength = length }
                return state.helloLength!
            }
            guard length > helloLength else {
                return context.writeAndFlush(wrapOutboundOut(AddressedEnvelope(remoteAddress: target, data: envelope.data)), promise: nil)
            }
            let seen = state.withLockedValue { state in
                state.seen += 1
                return state.seen
            }
            let count = copies(envelope.data, seen)
            if count == 0 { state.withLockedValue { $0.dropped += 1 } }
            for _ in 0..<count {
                context.write(wrapOutboundOut(AddressedEnvelope(remoteAddress: target, data: envelope.data)), promise: nil)
            }
            context.flush()
        }
    }
}
