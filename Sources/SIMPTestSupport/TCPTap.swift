import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A TCP forwarder on loopback that records every byte it passes, both ways: put it between
/// clients and a relay's control port to see what an on-path observer sees.
public final class TCPTap: Sendable {
    /// The tap's listening socket.
    public let channel: Channel
    /// Where clients connect instead of the relay.
    public var address: SocketAddress { channel.localAddress! }
    private let group: MultiThreadedEventLoopGroup
    private let wire: NIOLockedValueBox<[UInt8]>

    /// Listens on a free loopback port and forwards each connection to `target`.
    public static func start(target: SocketAddress) async throws -> TCPTap {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let wire = NIOLockedValueBox<[UInt8]>([])
        let record: @Sendable (ByteBuffer) -> Void = { bytes in wire.withLockedValue { $0 += bytes.readableBytesView } }
        let channel = try await ServerBootstrap(group: group)
            .childChannelInitializer { inbound in
                let toRelay = Splice(record: record)
                return inbound.pipeline.addHandler(toRelay).flatMap {
                    ClientBootstrap(group: inbound.eventLoop)
                        .channelInitializer { $0.pipeline.addHandler(Splice(record: record, partner: inbound)) }
                        .connect(to: target)
                }.map { outbound in toRelay.connected(to: outbound) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return TCPTap(channel: channel, group: group, wire: wire)
    }

    private init(channel: Channel, group: MultiThreadedEventLoopGroup, wire: NIOLockedValueBox<[UInt8]>) {
        self.channel = channel
        self.group = group
        self.wire = wire
    }

    /// Every byte seen so far, both directions, in order of arrival.
    public var recorded: [UInt8] { wire.withLockedValue { $0 } }

    /// Closes the tap and stops its event loop.
    public func stop() async {
        try? await channel.close()
        try? await group.shutdownGracefully()
    }

    /// One direction of a connection: what it reads is recorded and written to its partner.
    private final class Splice: ChannelInboundHandler, @unchecked Sendable { // confined to one event loop
        typealias InboundIn = ByteBuffer
        let record: @Sendable (ByteBuffer) -> Void
        var partner: Channel?
        var waiting: [ByteBuffer] = []

        init(record: @escaping @Sendable (ByteBuffer) -> Void, partner: Channel? = nil) {
            self.record = record
            self.partner = partner
        }

        func connected(to partner: Channel) {
            self.partner = partner
            for bytes in waiting { partner.write(bytes, promise: nil) }
            waiting.removeAll()
            partner.flush()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let bytes = unwrapInboundIn(data)
            record(bytes)
            if let partner { partner.writeAndFlush(bytes, promise: nil) } else { waiting.append(bytes) }
        }

        func channelInactive(context: ChannelHandlerContext) {
            partner?.close(promise: nil)
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: Error) {
            context.close(promise: nil)
        }
    }
}
