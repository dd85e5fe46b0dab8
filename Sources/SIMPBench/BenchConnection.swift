import NIOCore
import NIOPosix
import SIMPCore
import SIMPNIO

/// Why the bench could not set itself up.
public struct BenchError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// One bench user's registration with the relay: a control connection that has been accepted
/// (CONNECTED), where the relay takes datagrams, and the session's keys.
struct BenchSession {
    let user: String
    let control: Channel
    /// The relay's UDP address: the control connection's peer IP at CONNECTED's `udpPort`.
    let relayDatagramAddress: SocketAddress
    let keys: SessionKeys
    /// The relay's CONNECTED said it routes batch receipts.
    let relayBatchesReceipts: Bool
    /// The largest datagram the relay takes (CONNECTED's `maxDatagramSize`, or the default).
    let maxDatagramSize: Int
}

/// A control connection of a bench user: answers PING, logs in (development relays only: the
/// bench's users have no passwords), completes the connect promise on CONNECTED (or fails it on
/// ERROR), then hands every other message to `onMessage`.
final class BenchControlHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = SIMPMessage
    var connectPromise: EventLoopPromise<(SIMPMessage, SessionKeys)>?
    var login: (client: LoginClient, clientNonce: [UInt8], udpPort: Int)?
    /// Called on the event loop with each message after CONNECTED; `flush` is due at read end.
    var onMessage: (SIMPMessage) -> Void = { _ in }
    /// Called when a burst of reads ends.
    var onReadComplete: () -> Void = {}

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let message = try? MessageCodec.decode(unwrapInboundIn(data)) else { return }
        switch message.kind {
        case .ping:
            var pong = SIMPMessage(kind: .pong, messageId: message.messageId)
            pong.time = message.time
            context.writeAndFlush(wrapOutboundOut(pong), promise: nil)
        case .challenge where connectPromise != nil:
            guard var login, message.iterations == 0,
                let answer = try? login.client.answer(message, clientNonce: login.clientNonce, udpPort: login.udpPort)
            else {
                connectPromise?.fail(BenchError("the relay requires passwords: run simp-bench against a relay started with --no-login"))
                connectPromise = nil
                return
            }
            self.login = login
            context.writeAndFlush(wrapOutboundOut(answer.frame), promise: nil)
        case .connected where connectPromise != nil:
            if let keys = try? login?.client.accept(message, transcript: nil) {
                connectPromise?.succeed((message, keys))
            } else {
                connectPromise?.fail(BenchError("CONNECTED before the login finished"))
            }
            connectPromise = nil
        case .error where connectPromise != nil:
            connectPromise?.fail(BenchError("relay refused the login: \(message.errorCode) \(message.errorText)"))
            connectPromise = nil
        default:
            onMessage(message)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) { onReadComplete() }

    func channelInactive(context: ChannelHandlerContext) {
        connectPromise?.fail(BenchError("relay closed the control connection"))
        connectPromise = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) { context.close(promise: nil) }
}

/// Opens control connections and registers users.
enum BenchConnector {
    /// Connects `user` to the relay at `host:port` (from `source`, a local address, when given)
    /// and registers `udpPort` as its datagram port; `handler` stays in the pipeline for the
    /// session's lifetime. Call on `loop`.
    static func register(
        user: String, udpPort: Int, host: String, port: Int, source: SocketAddress? = nil, handler: BenchControlHandler,
        on loop: EventLoop
    ) -> EventLoopFuture<BenchSession> {
        let handler = NIOLoopBound(handler, eventLoop: loop)
        var bootstrap = ClientBootstrap(group: loop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(10))
        if let source { bootstrap = bootstrap.bind(to: source) }
        return
            bootstrap
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addSIMPControlHandlers(
                        maxFrameSize: Framing.defaultMaxFrameSize, handler.value)
                }
            }
            .connect(host: host, port: port)
            .flatMap { channel in
                let promise = loop.makePromise(of: (SIMPMessage, SessionKeys).self)
                handler.value.connectPromise = promise
                let client = LoginClient(user: user, password: nil)
                let (auth, nonce) = client.start()
                handler.value.login = (client, nonce, udpPort)
                channel.writeAndFlush(auth, promise: nil)
                let timeout = loop.scheduleTask(in: .seconds(10)) {
                    promise.fail(BenchError("no CONNECTED for \(user) within 10 s"))
                }
                return promise.futureResult.flatMapThrowing { connected, keys in
                    timeout.cancel()
                    guard var address = channel.remoteAddress else { throw BenchError("control connection has no peer address") }
                    address.port = Int(connected.udpPort)
                    return BenchSession(
                        user: user, control: channel, relayDatagramAddress: address, keys: keys,
                        relayBatchesReceipts: connected.batchReceipts,
                        maxDatagramSize: connected.maxDatagramSize > 0 ? Int(connected.maxDatagramSize) : SealedDatagram.defaultMaxDatagramSize)
                }.flatMapErrorThrowing { error in
                    channel.close(promise: nil)
                    throw error
                }
            }
    }

    /// Binds a UDP socket on `host` (free port) whose datagrams go to `handler`. Call on `loop`.
    static func bindDatagramSocket(host: String, handler: ChannelHandler, on loop: EventLoop) -> EventLoopFuture<Channel> {
        let handler = NIOLoopBound(handler, eventLoop: loop)
        return DatagramBootstrap(group: loop)
            .channelOption(.socketOption(.so_rcvbuf), value: 4 << 20)
            .channelOption(.datagramVectorReadMessageCount, value: 64)
            // One recvmmsg per wake-up: a read that leaves datagrams behind is woken again at
            // once, and a short one does not pay for a second call that finds nothing.
            .channelOption(.maxMessagesPerRead, value: 1)
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 64 * 2048))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(handler.value) }
            }
            .bind(host: host, port: 0)
    }
}
