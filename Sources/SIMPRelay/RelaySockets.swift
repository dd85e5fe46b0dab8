import NIOCore
import NIOPosix
import NIOSSL
import Prometheus
import SIMPCore
import SIMPNIO

/// The relay's listening sockets on its event loop: the TCP control listeners, the UDP socket
/// and, optionally, the Prometheus endpoint, wired to the relay's engine.
struct RelaySockets: Sendable {
    /// The listener on `configuration.port`.
    let control: Channel
    /// The listeners on `configuration.additionalPorts`, in that order.
    let additionalControl: [Channel]
    let datagram: Channel
    let metrics: Channel?
    let addresses: RelayAddresses

    /// Binds every socket, or none: a port in use (TCP or UDP) is an error naming it.
    static func bind(
        _ configuration: RelayConfiguration, engine: NIOLoopBound<RelayEngine>, metricsRegistry: PrometheusCollectorRegistry?,
        store: any RelayStore
    ) async throws -> RelaySockets {
        let loop = engine.eventLoop
        let tls = try configuration.tls.map(ControlTLS.serverContext)
        // No SO_REUSEADDR on the UDP socket: a port another relay holds must refuse to bind.
        let udp = try await bind("UDP", configuration, configuration.effectiveUDPPort) {
            try await DatagramBootstrap(group: loop)
                .channelOption(ReusePortSteering.reusePort, value: configuration.shard == nil ? 0 : 1)
                .channelOption(.socketOption(.so_rcvbuf), value: 4 << 20)
                .channelOption(.datagramVectorReadMessageCount, value: configuration.datagramVectorReadCount)
                // One recvmmsg per wake-up (NIO's default, 4, reads again until the socket is
                // empty: a second call per burst that finds nothing). Datagrams left behind wake
                // the loop again at once (level-triggered epoll).
                .channelOption(.maxMessagesPerRead, value: 1)
                // With a read hold the handler asks for each read itself (`DatagramHandler`).
                .channelOption(.autoRead, value: configuration.datagramReadHold <= .zero)
                .channelOption(
                    .recvAllocator,
                    value: FixedSizeRecvByteBufferAllocator(
                        capacity: configuration.datagramVectorReadCount * (configuration.maxDatagramSize + 1))
                )
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        engine.value.datagramChannel = channel
                        try channel.pipeline.syncOperations.addHandler(
                            DatagramHandler(
                                engine: engine.value, maxDatagramSize: configuration.maxDatagramSize,
                                readHold: configuration.datagramReadHold))
                    }
                }
                .bind(host: configuration.host, port: configuration.effectiveUDPPort).get()
        }
        if let shard = configuration.shard, shard.count > 1 {
            do { try await ReusePortSteering.attach(to: udp, relays: shard.count) } catch {
                try? await udp.close()
                throw error
            }
        }
        var listeners: [Channel] = []
        do {
            for port in [configuration.port] + configuration.additionalPorts {
                listeners.append(try await bindControl(configuration, port: port, tls: tls, engine: engine))
            }
        } catch {
            for listener in listeners { try? await listener.close() }
            try? await udp.close()
            throw error
        }
        let tcp = listeners[0]
        var metrics: Channel?
        if let metricsRegistry, let port = configuration.metricsPort {
            do {
                metrics = try await bind("metrics", configuration, port) {
                    return try await MetricsEndpoint.bind(
                        host: configuration.host, port: port, registry: metricsRegistry, redis: store.inboxRedis,
                        inboxSchedule: configuration.inboxSampling, on: loop
                    ) {
                        engine.value.updateSampledMetrics()
                    }
                }
            } catch {
                try? await udp.close()
                for listener in listeners { try? await listener.close() }
                throw error
            }
        }
        let controlAddresses = listeners.compactMap(\.localAddress)
        guard controlAddresses.count == listeners.count, let datagram = udp.localAddress else {
            throw RelayStartError("the relay's sockets have no local address")
        }
        return RelaySockets(
            control: tcp, additionalControl: Array(listeners.dropFirst()), datagram: udp, metrics: metrics,
            addresses: RelayAddresses(
                control: controlAddresses[0], additionalControl: Array(controlAddresses.dropFirst()), datagram: datagram,
                metrics: metrics?.localAddress))
    }

    /// Stops accepting control connections on every port (open connections stay).
    func stopListening() async {
        try? await control.close()
        for listener in additionalControl { try? await listener.close() }
    }

    func close() async {
        await stopListening()
        try? await datagram.close()
        try? await metrics?.close()
    }

    /// A TCP control listener on `port`, whose connections go to `engine`.
    private static func bindControl(
        _ configuration: RelayConfiguration, port: Int, tls: NIOSSLContext?, engine: NIOLoopBound<RelayEngine>
    ) async throws -> Channel {
        try await bind("TCP", configuration, port) {
            try await ServerBootstrap(group: engine.eventLoop)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                // When a relay restarts, its users all connect again within about a second
                // (the clients' first reconnect delay, ±20 %): NIO's default accept backlog
                // (128) overflowed, the kernel dropped SYNs, and clients waited out SYN
                // retransmits (1, 3, 7 s …). The kernel caps it at net.core.somaxconn.
                .serverChannelOption(.backlog, value: 4096)
                .serverChannelOption(ReusePortSteering.reusePort, value: configuration.shard == nil ? 0 : 1)
                // Up to 64 accepts per wake-up (NIO's default is 4): a burst of connections
                // (a restart's reconnects, a flood of idle ones) leaves the accept queue in
                // fewer loop turns, each of which also runs timers and other reads.
                .serverChannelOption(.maxMessagesPerRead, value: 64)
                .serverChannelInitializer { server in
                    server.eventLoop.makeCompletedFuture { try server.pipeline.syncOperations.addHandler(AcceptGate(engine: engine.value)) }
                }
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        // The child's options are set here, synchronously: as `childChannelOption`s
                        // NIO applies them one future at a time, about a fifth of an accepted
                        // connection's setup in a debug build (`perf`, 2,200 idle connections).
                        guard let options = channel.syncOptions else { throw ChannelError.operationUnsupported }
                        try options.setOption(.socketOption(.tcp_nodelay), value: 1)
                        // Each connection keeps its last receive buffer for the next read (NIO's
                        // pooled receive allocator): start it at 64 bytes, not 2,048, since an idle
                        // session's frames (PING, PONG) are tens of bytes. It grows after reads that
                        // fill it (a login, a burst of receipts).
                        try options.setOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 64, maximum: 65536))
                        // One read (at most 64 KiB) per connection per loop turn: a client flooding
                        // requests gets one burst handled before the other connections' turn.
                        try options.setOption(.maxMessagesPerRead, value: 1)
                        if let tls { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls)) }
                        try channel.pipeline.syncOperations.addSIMPControlHandlers(
                            maxFrameSize: configuration.maxFrameSize, ControlChannelHandler(engine: engine.value))
                    }
                }
                .bind(host: configuration.host, port: port).get()
        }
    }

    private static func bind(_ what: String, _ configuration: RelayConfiguration, _ port: Int, _ body: () async throws -> Channel) async throws
        -> Channel
    {
        do { return try await body() } catch {
            throw RelayStartError("cannot listen on \(what) \(configuration.host):\(port): \(error)")
        }
    }
}
