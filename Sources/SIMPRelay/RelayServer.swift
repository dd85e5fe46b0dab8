import CoreMetrics
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import SIMPCore
import Prometheus
import SIMPRedis

/// A running SIMP relay: TCP control listener, UDP forwarder, registrations in Redis.
///
/// All of a relay's channels share one event loop, so `RelayCore` needs no locks; Redis calls
/// run on the Redis client's own thread.
public final class RelayServer: @unchecked Sendable {
    public let configuration: RelayConfiguration
    private let group: MultiThreadedEventLoopGroup
    private let redis: RedisClient
    private let engine: RelayEngine
    private let registry: Registry
    private var tcpChannel: Channel?
    /// Set before the event loop shuts down, so late callers get an error instead of a hang.
    private let stopped = NIOLockedValueBox(false)
    private var udpChannel: Channel?
    private var metricsChannel: Channel?
    /// What /metrics exports, if the relay serves it.
    private let metricsRegistry: PrometheusCollectorRegistry?
    private var refreshTask: RepeatedTask?
    /// This relay's delivery channel and the moves channel, on a connection of their own.
    private var subscriber: RedisSubscriber?
    private var heartbeatTask: RepeatedTask?
    private var logger: Logger { configuration.logger }

    /// The bound control address (after `start`).
    public private(set) var controlAddress: SocketAddress?
    /// The bound datagram address (after `start`).
    public private(set) var datagramAddress: SocketAddress?
    /// The bound Prometheus endpoint (after `start`, with `metricsPort` set).
    public private(set) var metricsAddress: SocketAddress?

    public init(configuration: RelayConfiguration) {
        self.configuration = configuration
        self.group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        self.redis = RedisClient(url: configuration.redis, logger: configuration.logger)
        self.registry = Registry(redis: redis, ttlSeconds: configuration.registrationTTLSeconds)
        let registry = configuration.metricsRegistry ?? (configuration.metricsPort != nil ? PrometheusCollectorRegistry() : nil)
        self.metricsRegistry = registry
        let factory: MetricsFactory = registry.map(RelayPrometheus.factory) ?? MetricsSystem.factory
        // The core learns the UDP port once it is bound (`coreConfiguration` leaves 0 until then).
        self.engine = RelayEngine(
            core: RelayCore(configuration: configuration.coreConfiguration()),
            registry: self.registry, credentials: CredentialStore(redis: redis),
            inboxStore: InboxStore(redis: redis, maxMessages: configuration.inboxMaxMessages, ttlSeconds: configuration.inboxTTLSeconds),
            roomStore: RoomStore(redis: redis, postTTLSeconds: configuration.inboxTTLSeconds),
            presenceStore: PresenceStore(redis: redis, onlineTTLSeconds: configuration.registrationTTLSeconds),
            heartbeat: configuration.heartbeat, eventLoop: group.next(),
            logger: configuration.logger, metrics: RelayMetrics(factory: factory))
    }

    /// Checks Redis, binds both sockets and starts refreshing registrations.
    /// Throws a readable error if Redis is unreachable or a port is taken.
    public func start() async throws {
        let loop = engine.eventLoop
        do {
            _ = try await redis.command(["PING"])
        } catch {
            throw RelayStartError("Redis is not reachable at \(configuration.redis) (\(error)). Start Redis or pass --redis.")
        }
        let tls = try configuration.tls.map(ControlTLS.serverContext)
        let udp = try await bind("UDP", configuration.effectiveUDPPort) {
            try await DatagramBootstrap(group: loop)
                .channelOption(.socketOption(.so_rcvbuf), value: 4 << 20)
                .channelOption(.datagramVectorReadMessageCount, value: configuration.datagramVectorReadCount)
                .channelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(
                    capacity: configuration.datagramVectorReadCount * (configuration.maxDatagramSize + 1)))
                .channelInitializer { [engine, configuration] channel in
                    channel.pipeline.addHandler(DatagramHandler(engine: engine, maxDatagramSize: configuration.maxDatagramSize))
                }
                .bind(host: configuration.host, port: configuration.effectiveUDPPort).get()
        }
        let udpPort = udp.localAddress?.port ?? 0
        try await loop.submit { [engine] in
            engine.datagramChannel = udp
            engine.setUDPPort(udpPort)
        }.get()
        let tcp = try await bind("TCP", configuration.port) {
            try await ServerBootstrap(group: loop)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { [engine, configuration] channel in
                    channel.eventLoop.makeCompletedFuture {
                        if let tls { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls)) }
                        try channel.pipeline.syncOperations.addSIMPControlHandlers(
                            maxFrameSize: configuration.maxFrameSize, ControlChannelHandler(engine: engine))
                    }
                }
                .bind(host: configuration.host, port: configuration.port).get()
        }
        udpChannel = udp
        tcpChannel = tcp
        controlAddress = tcp.localAddress
        datagramAddress = udp.localAddress
        if let metricsRegistry, let port = configuration.metricsPort {
            let endpoint = try await bind("metrics", port) { [engine, redis] in
                try await MetricsEndpoint.bind(host: configuration.host, port: port, registry: metricsRegistry, on: loop) {
                    engine.updateSampledMetrics(redisRoundTrips: redis.roundTrips)
                }
            }
            metricsChannel = endpoint
            metricsAddress = endpoint.localAddress
        }
        do { try await subscribe() } catch {
            await subscriber?.stop()
            try? await tcp.close()
            try? await udp.close()
            try? await metricsChannel?.close()
            throw error
        }
        startRefreshing()
        // Check heartbeats a few times per interval, so a dead client goes within ~1/4 interval of its deadline.
        let tick = TimeAmount.nanoseconds(max(20_000_000, min(1_000_000_000, configuration.heartbeat.interval.nanoseconds / 4)))
        heartbeatTask = loop.scheduleRepeatedTask(initialDelay: tick, delay: tick) { [engine] _ in engine.heartbeatTick() }
        if tls == nil { logger.warning("\(ControlTLS.plaintextWarning(host: configuration.host))") }
        if !configuration.requireLogin {
            logger.warning("LOGIN IS OFF (development mode): anyone who reaches this relay can claim any user. Never run it like this in production.")
        }
        logger.info("relay listening", metadata: [
            "tcp": "\(tcp.localAddress.flatMap(AddressText.format) ?? "?")",
            "udp": "\(udp.localAddress.flatMap(AddressText.format) ?? "?")",
            "redis": "\(configuration.redis)", "relay": "\(configuration.relayId)",
        ])
    }

    /// Stops accepting, drains (receipts for datagrams already forwarded are still routed, up
    /// to `drainTimeout`), removes this relay's registrations from Redis and closes everything.
    public func shutdown() async {
        guard !stopped.withLockedValue({ $0 }) else { return } // after crash()
        refreshTask?.cancel()
        heartbeatTask?.cancel()
        try? await tcpChannel?.close()
        await drain()
        await subscriber?.stop()
        let registrations = (try? await engine.eventLoop.submit { [engine] in
            engine.closeAllForShutdown()
        }.get()) ?? []
        do {
            try await registry.withdraw(relayId: configuration.relayId, registrations: registrations, on: engine.eventLoop).get()
        } catch {
            logger.warning("could not remove registrations from Redis; they expire by TTL", metadata: ["error": "\(error)"])
        }
        try? await udpChannel?.close()
        try? await metricsChannel?.close()
        await redis.shutdown()
        stopped.withLockedValue { $0 = true }
        try? await group.shutdownGracefully()
        logger.info("relay stopped", metadata: ["relay": "\(configuration.relayId)", "sessions": "\(registrations.count)"])
    }

    /// Stops as a killed process would, for failover tests: sockets close at once, nothing is
    /// drained or withdrawn from Redis (registrations and the relay's key expire by TTL).
    public func crash() async {
        refreshTask?.cancel()
        heartbeatTask?.cancel()
        await subscriber?.stop()
        try? await tcpChannel?.close()
        try? await udpChannel?.close()
        _ = try? await engine.eventLoop.submit { [engine] in engine.closeAllForShutdown() }.get()
        try? await metricsChannel?.close()
        await redis.shutdown()
        stopped.withLockedValue { $0 = true }
        try? await group.shutdownGracefully()
        logger.notice("relay crashed on purpose", metadata: ["relay": "\(configuration.relayId)"])
    }

    /// Subscribes to this relay's delivery channel and the moves channel, and waits until the
    /// subscription is in place (so nothing published after `start` returns is missed).
    private func subscribe() async throws {
        let ready = NIOLockedValueBox(false)
        let subscriber = RedisSubscriber(
            url: configuration.redis,
            channels: [RelayBus.deliveryChannel(configuration.relayId), RelayBus.movesChannel],
            logger: logger,
            onSubscribed: { [engine] in
                engine.eventLoop.execute { engine.relayChannelsSubscribed() }
                ready.withLockedValue { $0 = true }
            },
            onMessage: { [engine] channel, payload in
                engine.eventLoop.execute { engine.relayChannelMessage(channel: channel, payload: payload) }
            })
        subscriber.start()
        self.subscriber = subscriber
        let deadline = NIODeadline.now() + .seconds(5)
        while !ready.withLockedValue({ $0 }) {
            guard NIODeadline.now() < deadline else {
                throw RelayStartError("could not subscribe to Redis pub/sub at \(configuration.redis)")
            }
            try await Task.sleep(nanoseconds: 2_000_000)
        }
    }

    /// Waits until no client is left, no receipt has come for `drainQuietPeriod`, or
    /// `drainTimeout` has passed.
    private func drain() async {
        let deadline = NIODeadline.now() + configuration.drainTimeout
        let quiet = configuration.drainQuietPeriod
        try? await engine.eventLoop.submit { [engine] in engine.beginDrain() }.get()
        while NIODeadline.now() < deadline {
            let settled = (try? await engine.eventLoop.submit { [engine] in engine.drainSettled(quietPeriod: quiet) }.get()) ?? true
            if settled { return }
            try? await Task.sleep(nanoseconds: 10_000_000)
        }
        logger.notice("drain time over; closing the remaining connections", metadata: ["relay": "\(configuration.relayId)"])
    }

    /// A snapshot of the relay's counters; throws `RelayStoppedError` after `shutdown()`.
    public func statistics() async throws -> RelayStatistics {
        guard !stopped.withLockedValue({ $0 }) else { throw RelayStoppedError() }
        return try await engine.eventLoop.submit { [engine] in engine.statistics }.get()
    }

    /// Redis round trips made by this relay so far.
    public var redisRoundTrips: Int { redis.roundTrips }

    private func startRefreshing() {
        let interval = TimeAmount.milliseconds(Int64(configuration.registrationTTLSeconds) * 1000 / 3)
        let description = "tcp=\(controlAddress.flatMap(AddressText.format) ?? "") udp=\(datagramAddress.flatMap(AddressText.format) ?? "")"
        refreshTask = engine.eventLoop.scheduleRepeatedAsyncTask(initialDelay: .zero, delay: interval) { [engine, registry, configuration] _ in
            let announced = registry.announceRelay(configuration.relayId, description: description, on: engine.eventLoop)
            let live = engine.liveRegistrations
            let refreshed = registry.refresh(live, on: engine.eventLoop)
            let present = engine.presenceStore.refresh(live.map(\.user), now: WallClock.millisecondsSinceEpoch(), on: engine.eventLoop)
            return announced.and(refreshed).and(present).map { _ in }.flatMapErrorWithEventLoop { error, loop in
                engine.redisFailed("refresh registrations", error)
                return loop.makeSucceededVoidFuture()
            }
        }
    }

    private func bind(_ what: String, _ port: Int, _ body: () async throws -> Channel) async throws -> Channel {
        do { return try await body() } catch {
            throw RelayStartError("cannot listen on \(what) \(configuration.host):\(port): \(error)")
        }
    }
}

/// The relay has been shut down.
public struct RelayStoppedError: Error, CustomStringConvertible {
    public var description: String { "the relay has been shut down" }
}

/// Why a relay could not start.
public struct RelayStartError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
