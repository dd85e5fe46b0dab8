import NIOCore
import NIOEmbedded
import SIMPCore
import SIMPNIO
import SIMPRelay

/// The relay's real engine and channel handlers on an `EmbeddedEventLoop`, with an
/// `InMemoryRelayStore`: control connections and the UDP socket are `EmbeddedChannel`s, time
/// moves only when the caller says so, and no `redis-server` is involved. What the relay writes
/// stays in the channels (`readOutbound`) unless a sink is given, which then receives each write
/// as it is flushed.
///
/// For tests of the relay and of clients (a client written from docs/PROTOCOL.md can be tested
/// against it without sockets), and for the simulator in SIMPLab. Every method must be called on
/// the thread that made the loop.
public final class EmbeddedRelay {
    /// The loop every channel and timer of the relay runs on; its clock is the relay's.
    public let loop: EmbeddedEventLoop
    /// The store's contents (what the engine asks may be a wrapper around it: `init`'s `asking`).
    public let store: InMemoryRelayStore
    /// The production engine under test (the simulator reaches into it).
    package let engine: RelayEngine
    /// The relay's UDP socket.
    public let datagrams: EmbeddedChannel
    /// The UDP port the relay announces.
    public let udpPort: Int
    /// The users connected through `connect`, by name.
    public internal(set) var users: [String: EmbeddedUser] = [:]
    /// Datagrams read from the channel while looking for another, not yet handed to the caller.
    var unread: [(user: String, message: SIMPMessage)] = []

    /// A relay configured for development (CONNECT without login) on UDP port 7601.
    public static func developmentConfiguration(relayId: String = "embedded") -> RelayCore.Configuration {
        var configuration = RelayCore.Configuration(relayId: relayId, udpPort: 7601)
        configuration.requireLogin = false
        return configuration
    }

    /// A relay that has not announced itself yet (`listen`). The core's entropy is seeded with
    /// `seed`; its time is `loop`'s. `asking` is the store the engine sends its requests to
    /// (default: `store`), e.g. one that answers after a delay. `datagramsSent`, if given,
    /// receives every datagram the relay sends.
    public convenience init(
        configuration: RelayCore.Configuration, seed: UInt64 = 42, store: InMemoryRelayStore = InMemoryRelayStore(),
        asking: (any RelayStore)? = nil, loop: EmbeddedEventLoop = EmbeddedEventLoop(),
        datagramsSent: ((AddressedEnvelope<ByteBuffer>) -> Void)? = nil
    ) throws {
        try self.init(
            configuration: configuration, seed: seed, store: store, asking: asking, loop: loop, datagramsSent: datagramsSent, instrumented: false)
    }

    /// As the public initializer; `instrumented` gives the engine `simp-server`'s logs and
    /// metrics (`RelayEngine.init(core:store:eventLoop:clock:instrumented:)`).
    package init(
        configuration: RelayCore.Configuration, seed: UInt64 = 42, store: InMemoryRelayStore = InMemoryRelayStore(),
        asking: (any RelayStore)? = nil, loop: EmbeddedEventLoop = EmbeddedEventLoop(),
        datagramsSent: ((AddressedEnvelope<ByteBuffer>) -> Void)? = nil, instrumented: Bool
    ) throws {
        self.loop = loop
        self.store = store
        self.udpPort = configuration.udpPort
        engine = RelayEngine(
            core: RelayCore(configuration: configuration, entropy: .seeded(seed), now: loop.now), store: asking ?? store,
            eventLoop: loop, clock: { loop.now }, instrumented: instrumented)
        datagrams = EmbeddedChannel(loop: loop)
        if let datagramsSent {
            try datagrams.pipeline.syncOperations.addHandler(OutboundTap<AddressedEnvelope<ByteBuffer>>(written: datagramsSent))
        }
        try datagrams.pipeline.syncOperations.addHandler(DatagramHandler(engine: engine, maxDatagramSize: configuration.maxDatagramSize))
        engine.datagramChannel = datagrams
    }

    /// A development relay (see `developmentConfiguration`), changed by `configure`, already
    /// listening.
    public convenience init(configure: (inout RelayCore.Configuration) -> Void = { _ in }) throws {
        var configuration = Self.developmentConfiguration()
        configure(&configuration)
        try self.init(configuration: configuration)
        listen()
    }

    /// The sockets are bound: the relay announces itself and its timers start.
    public func listen(description: String = "embedded") {
        engine.listening(udpPort: udpPort, description: description)
        loop.run()
    }

    /// Opens a control connection from `peer`. `written`, if given, receives every chunk of bytes
    /// the relay writes on it (one per frame) as it is flushed; `closed` is called once the
    /// connection is closed, by either side, after the relay has handled it.
    public func open(
        from peer: SocketAddress, written: ((ByteBuffer) -> Void)? = nil, closed: (() -> Void)? = nil
    ) throws -> EmbeddedChannel {
        let control = EmbeddedChannel(loop: loop)
        if written != nil || closed != nil {
            try control.pipeline.syncOperations.addHandler(OutboundTap<ByteBuffer>(written: written, closed: closed))
        }
        try control.pipeline.syncOperations.addSIMPControlHandlers(maxFrameSize: Framing.defaultMaxFrameSize, ControlChannelHandler(engine: engine))
        control.connect(to: peer, promise: nil)
        loop.run()
        return control
    }

    /// Bytes from the peer of `control` (any cut of the stream), read as one read burst.
    public func receive(_ bytes: ByteBuffer, on control: EmbeddedChannel) throws {
        try control.writeInbound(bytes)
        loop.run()
    }

    /// A datagram from `source` reaches the relay's UDP socket, as a read burst of its own.
    public func receiveDatagram(_ bytes: ByteBuffer, from source: SocketAddress) throws {
        try datagrams.writeInbound(AddressedEnvelope(remoteAddress: source, data: bytes))
        loop.run()
    }

    /// Moves the loop's clock on to `deadline`, running what falls due (the relay's timer among it).
    public func advance(to deadline: NIODeadline) {
        loop.advanceTime(to: deadline)
        loop.run()
    }

    /// Moves the loop's clock on by `amount`, running what falls due.
    public func advance(by amount: TimeAmount) {
        advance(to: loop.now + amount)
    }

    /// When the relay's timer next runs the core (nil: no timer is set).
    public var timerDeadline: NIODeadline? { engine.timerDeadline }

    /// What the relay has counted since it started.
    public var statistics: RelayStatistics { engine.statistics }

    /// Starts the graceful drain (as on SIGTERM); the future completes when it is over.
    public func drain() -> EventLoopFuture<Void> { engine.drain() }

    /// Stops the relay: registrations are withdrawn and every connection is closed.
    @discardableResult
    public func shutDown() -> EventLoopFuture<Void> {
        let done = engine.shutDown()
        loop.run()
        return done
    }
}
