import NIOCore
import NIOPosix

/// A TCP proxy on loopback in front of the relay's control port, so a scenario can cut a
/// client's control connection (`cut()`), as a middlebox or a flaky network would.
public final class ControlProxy: @unchecked Sendable { // `open` confined to `loop`
    private let loop: EventLoop
    private let target: SocketAddress
    private var server: Channel!
    private var open: [Channel] = []

    public var port: Int { server.localAddress!.port! }

    public static func start(target: SocketAddress, group: EventLoopGroup) async throws -> ControlProxy {
        let proxy = ControlProxy(target: target, loop: group.next())
        proxy.server = try await ServerBootstrap(group: proxy.loop)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.autoRead, value: false)
            .childChannelInitializer { inbound in proxy.splice(inbound) }
            .bind(host: "127.0.0.1", port: 0).get()
        return proxy
    }

    private init(target: SocketAddress, loop: EventLoop) {
        self.target = target
        self.loop = loop
    }

    /// Closes every connection passing through now (later ones pass again).
    public func cut() async {
        let channels = try? await loop.submit { () -> [Channel] in
            defer { self.open.removeAll() }
            return self.open
        }.get()
        for channel in channels ?? [] { try? await channel.close() }
    }

    public func stop() async {
        try? await server.close()
        await cut()
    }

    /// Connects to the relay for `inbound` and glues the two connections together.
    private func splice(_ inbound: Channel) -> EventLoopFuture<Void> {
        ClientBootstrap(group: inbound.eventLoop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connect(to: target)
            .flatMap { [self] outbound in
                // Both connections live on inbound's loop, where this runs.
                return inbound.eventLoop.makeCompletedFuture {
                    let (a, b) = Glue.pair()
                    try inbound.pipeline.syncOperations.addHandler(a)
                    try outbound.pipeline.syncOperations.addHandler(b)
                    self.loop.execute {
                        self.open.append(contentsOf: [inbound, outbound])
                        self.open.removeAll { !$0.isActive }
                    }
                    inbound.read()
                }
            }
            .flatMapError { error in inbound.close().flatMapThrowing { throw error } }
    }

    /// Forwards bytes between two channels of one event loop; either closing closes both.
    private final class Glue: ChannelDuplexHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        private var partner: Glue?
        private var context: ChannelHandlerContext?

        static func pair() -> (Glue, Glue) {
            let a = Glue(), b = Glue()
            a.partner = b
            b.partner = a
            return (a, b)
        }

        func handlerAdded(context: ChannelHandlerContext) { self.context = context }
        func handlerRemoved(context: ChannelHandlerContext) {
            self.context = nil
            partner = nil
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            partner?.context?.write(data, promise: nil)
        }

        func channelReadComplete(context: ChannelHandlerContext) {
            partner?.context?.flush()
            context.read()
        }

        func channelActive(context: ChannelHandlerContext) { context.read() }

        func channelInactive(context: ChannelHandlerContext) {
            partner?.context?.close(promise: nil)
        }

        func errorCaught(context: ChannelHandlerContext, error: Error) {
            context.close(promise: nil)
        }
    }
}
