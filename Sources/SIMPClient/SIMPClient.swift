import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import SIMPCore
import SIMPE2E

/// A SIMP user's connection to a relay: registers a UDP address over TCP, sends messages that
/// are retransmitted until receipted, and delivers each incoming message once.
///
/// ```swift
/// let client = SIMPClient(configuration: .init(serverHost: "127.0.0.1", serverPort: 7600, user: "alice"))
/// try await client.connect()
/// let result = try await client.send(text: "hello", to: "bob")
/// ```
/// Sendable: its state is the engine's (confined to the engine's event loop, reached through
/// `submit`), `lifecycle` (locked) and constants; `localDatagramAddress` is written once, by
/// `connect()`, before the socket it names is used.
public final class SIMPClient: @unchecked Sendable {
    public let configuration: ClientConfiguration
    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let engine: ClientEngine
    private let stream: AsyncStream<SIMPMessage>
    private let continuation: AsyncStream<SIMPMessage>.Continuation
    /// Open, closing or closed: every call that needs the engine asks it (ClientLifecycle.swift).
    let lifecycle = NIOLockedValueBox(ClientLifecycle.open)
    private let noticeStream: AsyncStream<DeliveryNotice>
    private let noticesContinuation: AsyncStream<DeliveryNotice>.Continuation
    private let peerEventStream: AsyncStream<PeerEvent>
    let fileDatagramStream: AsyncStream<SIMPMessage>
    private let fileDatagramsContinuation: AsyncStream<SIMPMessage>.Continuation
    private let peerEventsContinuation: AsyncStream<PeerEvent>.Continuation
    private let states: AsyncStream<ConnectionState>
    private let endToEndNoticeStream: AsyncStream<EndToEndNotice>
    private let endToEndNoticesContinuation: AsyncStream<EndToEndNotice>.Continuation
    private let statesContinuation: AsyncStream<ConnectionState>.Continuation
    private let paths: AsyncStream<DatagramPath>
    private let pathsContinuation: AsyncStream<DatagramPath>.Continuation

    /// Messages delivered to this user, each once, in arrival order (without those the
    /// configuration's `messageHandler` says the application had already).
    public var messages: AsyncStream<SIMPMessage> { stream }

    public init(configuration: ClientConfiguration) {
        self.configuration = configuration
        self.engine = ClientEngine(configuration: configuration, eventLoop: group.next())
        (stream, continuation) = AsyncStream.makeStream(of: SIMPMessage.self)
        (states, statesContinuation) = AsyncStream.makeStream(of: ConnectionState.self, bufferingPolicy: .bufferingNewest(16))
        engine.onMessage = { [continuation, handler = configuration.messageHandler, originHandler = configuration.originHandler, weak engine] in
            // Before the receipt: carryOut hands messages over first. A copy the application
            // already had (before a restart) is receipted, not handed over again.
            if let originHandler, let engine {
                guard originHandler($0, engine.origin(of: $0)) else { return false }
            } else {
                guard handler?($0) ?? true else { return false }
            }
            continuation.yield($0)
            return true
        }
        engine.onStateChange = { [statesContinuation] in statesContinuation.yield($0) }
        (paths, pathsContinuation) = AsyncStream.makeStream(of: DatagramPath.self, bufferingPolicy: .bufferingNewest(16))
        engine.onPathChange = { [pathsContinuation] in pathsContinuation.yield($0) }
        (noticeStream, noticesContinuation) = AsyncStream.makeStream(of: DeliveryNotice.self, bufferingPolicy: .bufferingNewest(4096))
        engine.onNotice = { [noticesContinuation] in noticesContinuation.yield($0) }
        engine.onDelay = { [noticesContinuation] delayed in
            noticesContinuation.yield(.delayed(messageId: delayed.messageId, to: delayed.to, waitedMillis: delayed.waited.nanoseconds / 1_000_000))
        }
        (peerEventStream, peerEventsContinuation) = AsyncStream.makeStream(of: PeerEvent.self, bufferingPolicy: .bufferingNewest(1024))
        engine.onPeerEvent = { [peerEventsContinuation] in peerEventsContinuation.yield($0) }
        (fileDatagramStream, fileDatagramsContinuation) = AsyncStream.makeStream(of: SIMPMessage.self, bufferingPolicy: .bufferingNewest(16_384))
        engine.onFileDatagram = { [fileDatagramsContinuation] in fileDatagramsContinuation.yield($0) }
        (endToEndNoticeStream, endToEndNoticesContinuation) = AsyncStream.makeStream(
            of: EndToEndNotice.self, bufferingPolicy: .bufferingNewest(1024))
    }

    /// News about end-to-end encryption: a peer's new or changed device, a message that could
    /// not be decrypted (one consumer; the newest 1024 are buffered).
    public var endToEndNotices: AsyncStream<EndToEndNotice> { endToEndNoticeStream }

    /// News about messages the relay stored for offline receivers: stored, delivered later, or
    /// discarded (one consumer; the newest 4096 are buffered).
    public var notices: AsyncStream<DeliveryNotice> { noticeStream }

    /// News about peers: typing indicators, and presence changes of users this client asked
    /// `who` about or shares a room with (one consumer; the newest 1024 are buffered).
    public var peerEvents: AsyncStream<PeerEvent> { peerEventStream }

    /// Every change of connection state, in order (one consumer; the newest 16 are buffered).
    public var connectionStates: AsyncStream<ConnectionState> { states }

    /// Every move of this client's datagrams to another path, in order: `.control` when UDP
    /// does not get through and they go over the control connection, `.udp` when they are back
    /// (docs/PROTOCOL.md §5.5; one consumer; the newest 16 are buffered).
    public var datagramPaths: AsyncStream<DatagramPath> { paths }

    /// The bound local UDP address (after `connect`).
    public private(set) var localDatagramAddress: SocketAddress?
    /// The id of the relay that accepted the latest CONNECT (after `close()`, the last one).
    public var relayId: String? {
        get async { try? await reading { $0.relayId } }
    }

    /// Binds the UDP socket, connects to the relay and registers. Throws `SIMPClientError`
    /// (`.closed` after `close()`: a closed client does not connect again; make a new one).
    /// Afterwards a lost relay is reconnected automatically (per `configuration.reconnect`),
    /// keeping the same UDP port and resending every unreceipted message.
    public func connect() async throws {
        let loop = engine.eventLoop
        guard case .open = lifecycle.withLockedValue({ $0 }) else { throw SIMPClientError.closed }
        let tls = try configuration.tls?.makeContext()
        statesContinuation.yield(.connecting)
        let udp = try await DatagramBootstrap(group: loop)
            .channelOption(.socketOption(.so_rcvbuf), value: 1 << 20)
            // Room for the largest datagram a relay may send (NIO's default, 2048 bytes, truncates longer ones).
            .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: 65536))
            // Up to 16 datagrams per read burst: their receipts leave as one batch per sender.
            .channelOption(.maxMessagesPerRead, value: 16)
            .channelInitializer { [engine] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ClientDatagramHandler(engine: engine))
                }
            }
            .bind(host: configuration.localHost, port: configuration.localUDPPort).get()
        localDatagramAddress = udp.localAddress
        do {
            if let settings = configuration.endToEnd, let endToEnd = try openEndToEnd(settings) {
                endToEnd.onNotice = { [endToEndNoticesContinuation] in endToEndNoticesContinuation.yield($0) }
                try await onEngine(now: { engine in engine.use(endToEnd) })
            }
            try await onEngine { engine in
                engine.datagrams = udp
                engine.tlsContext = tls
                return engine.connectAnyRelay()
            }
            try await publishKeys()
        } catch {
            try? await udp.close()
            throw error
        }
    }

    /// This device's end-to-end keys, made on first run. Keys that cannot be kept (a home that
    /// cannot be written) stop the client, or with `allowUnencrypted` turn encryption off.
    private func openEndToEnd(_ settings: EndToEndSettings) throws -> EndToEnd? {
        do {
            return try EndToEnd(settings: settings, user: configuration.user, device: configuration.device, logger: configuration.logger)
        } catch let error as SIMPClientError where settings.existingKeysOnly {
            throw error // no keys to use, and none are made
        } catch  where settings.allowUnencrypted {
            configuration.logger.warning("cannot keep end-to-end keys; messages go unencrypted", metadata: ["error": "\(error)"])
            return nil
        } catch {
            throw SIMPClientError.notEncryptable("cannot keep end-to-end keys in \(settings.home.path) (\(error)); --no-e2e sends unencrypted")
        }
    }

    /// Publishes this device's key bundle (end to end on). A relay that keeps no bundles is
    /// tolerated with `allowUnencrypted` (messages then go unencrypted, marked).
    private func publishKeys() async throws {
        guard let settings = configuration.endToEnd, !settings.existingKeysOnly else { return }
        do {
            try await onEngine { engine in engine.publishEndToEndKeys() }
        } catch SIMPClientError.rejected(.badRequest, let text) where settings.allowUnencrypted {
            configuration.logger.warning("the relay keeps no end-to-end keys; messages go unencrypted", metadata: ["relay": "\(text)"])
        } catch SIMPClientError.rejected(.badRequest, let text) {
            throw SIMPClientError.notEncryptable("the relay keeps no end-to-end keys (\(text)); --no-e2e sends unencrypted")
        }
    }

    /// This device's end-to-end identity (nil with end-to-end encryption off).
    public var identity: IdentityKey? {
        get async { try? await reading { $0.identity } }
    }

    /// The safety number with each device of `user` (docs/E2E.md §10): compare it with the
    /// one `user` sees to know no one substituted its keys.
    public func safetyNumbers(with user: String) async throws -> [(device: String, number: String)] {
        try await onEngine { engine in
            engine.endToEnd?.safetyNumbers(with: user, via: engine) ?? engine.eventLoop.makeSucceededFuture([])
        }
    }

    /// Sends a text message and waits until it is receipted, given up, or the connection drops.
    public func send(text: String, to user: String) async throws -> SendResult {
        try await send(SIMPMessage(kind: .text, toUser: user, content: text))
    }

    /// Sends a content message (TEXT, IMAGE or AUDIO) and waits for its outcome.
    public func send(_ message: SIMPMessage) async throws -> SendResult {
        try await submit(message).result.get()
    }

    /// Sends a content message and returns its id at once; the future completes with the outcome.
    /// The future is of the client's event loop, which stops at `close()`: wait on it (or add its
    /// callbacks) before closing; `close()` then completes it (`.connectionLost` if still open).
    /// Waiting that starts after `close()` never ends, even on a future already complete: NIO
    /// hands a callback added off the loop to the loop, which no longer runs.
    public func submit(_ message: SIMPMessage) async throws -> (messageId: UInt64, result: EventLoopFuture<SendResult>) {
        precondition(message.kind.isContent, "only TEXT, IMAGE and AUDIO are sent as messages")
        // Encrypted once, here: retransmissions (and the outbox) carry the same ciphertext. A
        // message that cannot be sealed before the relay is back waits (`HeldForKeys`).
        let (id, result) = try await onEngine { engine in engine.sealAndSend(message) }
        return (id, result)
    }

    /// Submits again every message the outbox kept from an earlier process of this user and
    /// device, with its original id (receivers drop copies they already have), oldest first.
    /// Returns them with their outcomes; messages that are unreadable on disk are named in
    /// `unreadable` (set aside as `.bad` files).
    public func resendOutbox() async throws -> (resent: [(message: SIMPMessage, result: EventLoopFuture<SendResult>)], unreadable: [String]) {
        guard let outbox = configuration.outbox else { return ([], []) }
        let (messages, unreadable) = outbox.load()
        var resent: [(message: SIMPMessage, result: EventLoopFuture<SendResult>)] = []
        for message in messages { resent.append((message, try await submit(message).result)) }
        return (resent, unreadable)
    }

    /// Messages sent in this session whose outcome is not known and that are not in the outbox
    /// (there is none, or it could not be written): they are lost when the process ends, so
    /// callers say which at exit. Oldest (lowest id) first; after `close()`, those at the close.
    public var messagesKeptInMemoryOnly: [SIMPMessage] {
        get async {
            let kept = try? await reading { Array($0.keptInMemoryOnly.values) }
            return (kept ?? []).sorted { $0.messageId < $1.messageId }
        }
    }

    /// Whether a newer session of this device took the relay session over; the client then
    /// stopped instead of reconnecting (`SIMPClientError.takenOver`).
    public var wasTakenOver: Bool {
        get async {
            guard case .takenOver? = try? await reading({ $0.stopped }) else { return false }
            return true
        }
    }

    /// Why the client stopped for good (taken over, or a reconnect's login refused), if it did:
    /// it then no longer reconnects (`ClientSession.stopped`).
    public var stopped: ClientSession.Stop? {
        get async { (try? await reading { $0.stopped }) ?? nil }
    }

    /// How this client's datagrams go to the relay now: over UDP, or over the control
    /// connection because UDP does not get through (docs/PROTOCOL.md §5.5); after `close()`,
    /// the path it used last.
    public var datagramPath: DatagramPath {
        get async { (try? await reading { $0.datagramPath }) ?? .udp }
    }

    /// Reliability counters of this client. After `close()` they are the final ones, as they
    /// stood when the client closed (a one-shot sender reads them after it is done).
    public func statistics() async throws -> ClientStatistics {
        try await reading { $0.statistics }
    }

    /// The `.offline` reason after `close()`: the user's own doing, not news.
    public static let closedReason = "closed"

    /// Says goodbye to the relay (its registration is removed) and closes the sockets.
    /// Calling it again does nothing. Afterwards calls that need the relay or the engine
    /// (sending, rooms, presence, keys) throw `SIMPClientError.closed` (`sendTyping` and
    /// `markRead` do nothing), and the accessors that report (`statistics()`, `relayId`,
    /// `datagramPath`, `identity`, `stopped`, `wasTakenOver`, `messagesKeptInMemoryOnly`)
    /// answer with what the client knew when it closed.
    public func close() async {
        let closing = lifecycle.withLockedValue { state in
            guard case .open = state else { return false }
            state = .closing
            return true
        }
        guard closing else { return }
        // The engine's loop still runs: close() alone submits to it from here on.
        let channels = try? await engine.eventLoop.submit { [engine] in
            engine.finishTakingMessages()
            return (engine.control, engine.datagrams)
        }.get()
        if let control = channels?.0, control.isActive {
            try? await control.writeAndFlush(SIMPMessage(kind: .disconnect, fromUser: configuration.user))
            try? await control.close()
        }
        try? await channels?.1?.close()
        statesContinuation.yield(.offline(reason: Self.closedReason))
        statesContinuation.finish()
        continuation.finish()
        noticesContinuation.finish()
        peerEventsContinuation.finish()
        fileDatagramsContinuation.finish()
        pathsContinuation.finish()
        endToEndNoticesContinuation.finish()
        await finishClosing()
        try? await group.shutdownGracefully()
    }
}

/// Feeds control frames to the engine.
final class ClientControlHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    private let engine: ClientEngine
    init(engine: ClientEngine) { self.engine = engine }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let message = try? MessageCodec.decode(unwrapInboundIn(data)) else { return }
        engine.controlReceived(message, on: context.channel)
    }

    func channelInactive(context: ChannelHandlerContext) {
        engine.controlClosed(context.channel)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        engine.controlFailed(context.channel, error)
        context.close(promise: nil)
    }
}

/// Feeds datagrams to the engine: each read arrives at the engine's `now`, and the end of a
/// read burst lets batched receipts go.
package final class ClientDatagramHandler: ChannelInboundHandler {
    package typealias InboundIn = AddressedEnvelope<ByteBuffer>
    private let engine: ClientEngine
    package init(engine: ClientEngine) { self.engine = engine }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        engine.datagramReceived(unwrapInboundIn(data).data, at: engine.now)
    }

    package func channelReadComplete(context: ChannelHandlerContext) {
        engine.datagramBurstEnded()
    }

    package func errorCaught(context: ChannelHandlerContext, error: Error) {}
}
