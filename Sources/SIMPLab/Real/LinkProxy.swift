import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// One client's path to the relay on loopback, impaired in both directions by the same
/// `ImpairedLink` model the simulator uses, and behaving like the client's NAT.
///
/// The client sends its datagrams to `clientSideAddress` (`ClientConfiguration.datagramTarget`)
/// and registers `publicPort` (`ClientConfiguration.advertisedUDPPort`), so the relay's
/// datagrams come back through the proxy too. `rebind()` is a NAT rebinding: the public port
/// changes, and datagrams still sent to the old one are lost.
public final class LinkProxy: @unchecked Sendable { // state confined to `loop`
    private let loop: EventLoop
    private var up: ImpairedLink<ByteBuffer>
    private var down: ImpairedLink<ByteBuffer>
    /// In front of `up`, sized with each datagram's UDP and IP headers.
    private var bottleneck: BottleneckQueue?
    private let relay: SocketAddress
    private var clientSide: Channel!
    private var publicSide: Channel!
    private var client: SocketAddress?
    private var start: NIODeadline?

    public private(set) var clientSideAddress: SocketAddress!
    /// The port the relay should send this client's datagrams to (changes on `rebind`).
    public var publicPort: Int { publicSide.localAddress!.port! }

    /// Binds both sides on 127.0.0.1 and starts forwarding.
    public static func start(
        up: LinkConditions, down: LinkConditions, seed: UInt64, stream: UInt64,
        relay: SocketAddress, group: EventLoopGroup, bottleneck: Bottleneck? = nil
    ) async throws -> LinkProxy {
        let proxy = LinkProxy(
            up: ImpairedLink(conditions: up, random: SeededRandom(seed: seed, stream: stream)),
            down: ImpairedLink(conditions: down, random: SeededRandom(seed: seed, stream: stream + 1)),
            relay: relay, loop: group.next())
        proxy.bottleneck = bottleneck.map(BottleneckQueue.init)
        proxy.clientSide = try await proxy.bind { proxy.fromClient($0) }
        proxy.clientSideAddress = proxy.clientSide.localAddress
        proxy.publicSide = try await proxy.bind { proxy.fromRelay($0) }
        return proxy
    }

    private init(up: ImpairedLink<ByteBuffer>, down: ImpairedLink<ByteBuffer>, relay: SocketAddress, loop: EventLoop) {
        self.up = up
        self.down = down
        self.relay = relay
        self.loop = loop
    }

    /// Where the client receives datagrams (known once it is connected).
    public func setClient(_ address: SocketAddress) async throws {
        try await loop.submit { self.client = address }.get()
    }

    /// Blackout windows count from `start` (the start of the workload).
    public func startClock(at start: NIODeadline) async throws {
        try await loop.submit { self.start = start }.get()
    }

    /// A NAT rebinding: a new public port; the old one is closed.
    public func rebind() async throws {
        let fresh = try await bind { [self] in fromRelay($0) }
        let old = try await loop.submit { () -> Channel in
            defer { self.publicSide = fresh }
            return self.publicSide
        }.get()
        try? await old.close()
    }

    /// What each direction did to its packets.
    public func statistics() async throws -> (up: LinkStatistics, down: LinkStatistics) {
        try await loop.submit { (self.up.statistics, self.down.statistics) }.get()
    }

    /// The client's datagrams the bottleneck dropped, and every byte it offered (headers included).
    func upTraffic() async throws -> (queueDrops: Int, bytesOffered: Int) {
        try await loop.submit { (self.bottleneck?.drops ?? 0, self.bytesOfferedUp) }.get()
    }

    private var bytesOfferedUp = 0

    public func stop() async {
        let channels = try? await loop.submit { () -> [Channel] in
            [self.clientSide, self.publicSide]
        }.get()
        for channel in channels ?? [] { try? await channel.close() }
    }

    /// IPv4 and UDP headers, counted in the bottleneck's sizes.
    static let udpIPHeaderBytes = 28

    private var elapsed: TimeAmount {
        guard let start else { return .hours(-1_000) }
        return .now() - start
    }

    private func fromClient(_ bytes: ByteBuffer) {
        let now = elapsed
        let size = bytes.readableBytes + Self.udpIPHeaderBytes
        bytesOfferedUp += size
        var entersLink = now
        if bottleneck != nil {
            guard let served = bottleneck?.admit(size: size, at: now) else { return }
            entersLink = served
        }
        let wait = entersLink - now
        let deliveries = up.send(bytes, at: entersLink).map { ImpairedLink<ByteBuffer>.Delivery(packet: $0.packet, after: $0.after + wait) }
        carry(deliveries, to: relay, via: { self.publicSide })
        scheduleRelease(\.up, to: relay, via: { self.publicSide })
    }

    private func fromRelay(_ bytes: ByteBuffer) {
        guard let client else { return }
        carry(down.send(bytes, at: elapsed), to: client, via: { self.clientSide })
        scheduleRelease(\.down, to: client, via: { self.clientSide })
    }

    private func carry(_ deliveries: [ImpairedLink<ByteBuffer>.Delivery], to target: SocketAddress, via channel: @escaping () -> Channel) {
        for delivery in deliveries {
            let send = { channel().writeAndFlush(AddressedEnvelope(remoteAddress: target, data: delivery.packet), promise: nil) }
            if delivery.after <= .zero { send() } else { loop.assumeIsolated().scheduleTask(in: delivery.after, send) }
        }
    }

    private func scheduleRelease(
        _ link: ReferenceWritableKeyPath<LinkProxy, ImpairedLink<ByteBuffer>>,
        to target: SocketAddress, via channel: @escaping () -> Channel
    ) {
        guard let release = self[keyPath: link].nextRelease, start != nil else { return }
        loop.assumeIsolated().scheduleTask(in: max(.zero, release - elapsed)) { [self] in
            carry(self[keyPath: link].releaseExpired(at: elapsed), to: target, via: channel)
        }
    }

    private func bind(_ receive: @escaping @Sendable (ByteBuffer) -> Void) async throws -> Channel {
        try await DatagramBootstrap(group: loop)
            .channelOption(.socketOption(.so_rcvbuf), value: 1 << 20)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Receiver(receive)) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    private final class Receiver: ChannelInboundHandler {
        typealias InboundIn = AddressedEnvelope<ByteBuffer>
        private let receive: (ByteBuffer) -> Void
        init(_ receive: @escaping (ByteBuffer) -> Void) { self.receive = receive }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) { receive(unwrapInboundIn(data).data) }
        func errorCaught(context: ChannelHandlerContext, error: Error) {} // e.g. ICMP port unreachable
    }
}
