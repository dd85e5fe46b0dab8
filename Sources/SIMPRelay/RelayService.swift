import CoreMetrics
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Prometheus
import SIMPCore
import SIMPRedis
import ServiceLifecycle

/// A SIMP relay as a swift-service-lifecycle `Service`: `run()` checks the store, binds the
/// TCP control listener, the UDP socket and the optional /metrics endpoint, subscribes to the
/// relay's channels, and serves until graceful shutdown; then it drains (receipts for
/// datagrams already forwarded are still routed), withdraws its registrations and closes
/// everything. Cancelled instead, it stops as a killed process would: sockets close, nothing
/// is withdrawn (registrations expire by TTL).
///
/// All of a relay's channels share one event loop of the injected group, so its core needs no locks.
public final class RelayService: Service, Sendable {
    public let configuration: RelayConfiguration
    private let eventLoop: EventLoop
    private let store: any RelayStore
    private let metricsRegistry: PrometheusCollectorRegistry?
    /// Completed once `run()` has bound the sockets, or failed with what stopped it.
    private let ready: EventLoopPromise<RelayAddresses>
    /// Whether `ready` has been completed: completing it again would schedule work on the
    /// loop, which may be shut down by the time the service is released.
    private let readyCompleted = NIOLockedValueBox(false)
    /// The running relay's engine (nil before start and after stop), for `statistics()`.
    private let engineBox = NIOLockedValueBox<NIOLoopBound<RelayEngine>?>(nil)

    /// A relay on one loop of `group`, with `store` (default: Redis or Redis Cluster at
    /// `configuration.redisEndpoint`, its connections on the relay's loop).
    public init(configuration: RelayConfiguration, group: EventLoopGroup, store: (any RelayStore)? = nil) {
        self.configuration = configuration
        self.eventLoop = group.next()
        self.ready = eventLoop.makePromise(of: RelayAddresses.self)
        self.store =
            store
            ?? RedisRelayStore(
                endpoint: configuration.redisEndpoint, limits: configuration.storeLimits,
                logger: configuration.logger, eventLoop: eventLoop)
        self.metricsRegistry = configuration.metricsRegistry ?? (configuration.metricsPort != nil ? PrometheusCollectorRegistry() : nil)
    }

    deinit {
        completeReady(.failure(RelayStoppedError())) // never run: nobody waits in vain
    }

    /// Where the relay listens, once `run()` has bound its sockets; throws what stopped it from starting.
    public func addresses() async throws -> RelayAddresses {
        try await ready.futureResult.get()
    }

    /// Store round trips made so far.
    public var storeRoundTrips: Int { store.roundTrips }

    public func run() async throws {
        try await run(configuration)
    }

    /// It will not run (`RelayShards` could not start it): whoever waits for `addresses()` hears why.
    func didNotStart(_ error: Error) {
        completeReady(.failure(error))
    }

    /// Completes `ready` the first time it is called; later calls do nothing.
    private func completeReady(_ result: Result<RelayAddresses, Error>) {
        let first = readyCompleted.withLockedValue { completed in
            defer { completed = true }
            return !completed
        }
        if first { ready.completeWith(result) }
    }

    /// Runs on `ports` instead of the configured ones (the relays of `RelayShards` share them).
    func run(ports: ListeningPorts) async throws {
        var onPorts = self.configuration
        onPorts.port = ports.tcp[0]
        onPorts.additionalPorts = Array(ports.tcp.dropFirst())
        onPorts.udpPort = ports.udp
        try await run(onPorts)
    }

    private func run(_ configuration: RelayConfiguration) async throws {
        let running: RunningRelay
        do {
            running = try await start(configuration)
        } catch {
            completeReady(.failure(error))
            await store.shutdown()
            throw error
        }
        completeReady(.success(running.addresses))
        let graceful: Void? = try? await gracefulShutdown()
        if graceful != nil, !Task.isCancelled {
            await running.stopGracefully()
        } else {
            await running.crash()
        }
        engineBox.withLockedValue { $0 = nil }
        await store.shutdown()
    }

    /// A snapshot of the relay's counters (after `addresses()` returned).
    public func statistics() async throws -> RelayStatistics {
        guard let engine = engineBox.withLockedValue({ $0 }) else { throw RelayStoppedError() }
        return try await eventLoop.submit { engine.value.statistics }.get()
    }

    private func start(_ configuration: RelayConfiguration) async throws -> RunningRelay {
        do { try await store.ping() } catch {
            throw RelayStartError(unreachable: configuration.redisEndpoint, error: error)
        }
        var coreConfiguration = configuration.coreConfiguration()
        do { coreConfiguration.decoySecret = try await store.decoySecret() } catch {
            throw RelayStartError("could not read or create the decoy secret at \(configuration.redisEndpoint): \(error)")
        }
        let tokenKeys = configuration.accessTokens.map { AccessTokenKeys(settings: $0, logger: configuration.logger) }
        if let tokenKeys {
            let verifier = try await tokenKeys.load()
            coreConfiguration.tokens?.verifier = verifier
            if (configuration.shard?.index ?? 0) == 0 {
                configuration.logger.notice(
                    "access tokens accepted",
                    metadata: ["jwks": "\(configuration.accessTokens?.jwksPath ?? "")", "keys": "\(verifier.keyIds.joined(separator: ","))"])
            }
        }
        let factory: MetricsFactory = metricsRegistry.map(RelayPrometheus.factory) ?? MetricsSystem.factory
        let engine = try await eventLoop.submit { [configuration, coreConfiguration, store, eventLoop] in
            NIOLoopBound(
                RelayEngine(
                    core: RelayCore(configuration: coreConfiguration, entropy: .system, now: .now()),
                    store: store, eventLoop: eventLoop, logger: configuration.logger, metrics: RelayMetrics(factory: factory)),
                eventLoop: eventLoop)
        }.get()
        engineBox.withLockedValue { $0 = engine }
        let sockets = try await RelaySockets.bind(configuration, engine: engine, metricsRegistry: metricsRegistry, store: store)
        do {
            try await store.subscribe(relayId: configuration.relayId, on: eventLoop) { event in engine.value.storeEvent(event) }.get()
        } catch {
            await sockets.close()
            throw RelayStartError("could not subscribe to the relay channels at \(configuration.redisEndpoint): \(error)")
        }
        try await eventLoop.submit {
            engine.value.listening(udpPort: sockets.addresses.datagram.port ?? 0, description: sockets.addresses.description)
        }.get()
        let firstOfProcess = (configuration.shard?.index ?? 0) == 0 // the warnings once, whatever --threads
        if configuration.tls == nil, firstOfProcess {
            configuration.logger.warning("\(ControlTLS.plaintextWarning(host: configuration.host))")
        }
        if !configuration.requireLogin, firstOfProcess {
            configuration.logger.warning(
                "LOGIN IS OFF (development mode): anyone who reaches this relay can claim any user. Never run it like this in production.")
        }
        configuration.logger.info(
            "relay listening",
            metadata: [
                "tcp": "\(sockets.addresses.allControl.map { AddressText.format($0) ?? "?" }.joined(separator: ","))",
                "udp": "\(AddressText.format(sockets.addresses.datagram) ?? "?")",
                "redis": "\(configuration.redisEndpoint)", "relay": "\(configuration.relayId)",
            ])
        let keyWatch = tokenKeys.map { keys in
            Task { await keys.watch { verifier in engine.eventLoop.execute { engine.value.replaceTokenVerifier(verifier) } } }
        }
        return RunningRelay(configuration: configuration, engine: engine, sockets: sockets, keyWatch: keyWatch)
    }
}

/// The addresses a running relay listens on.
public struct RelayAddresses: Sendable, Equatable {
    /// The control listener on the configured `port`.
    public var control: SocketAddress
    /// The control listeners on `additionalPorts`, in that order.
    public var additionalControl: [SocketAddress] = []
    public var datagram: SocketAddress
    /// The Prometheus endpoint, if the relay serves one.
    public var metrics: SocketAddress?

    /// Every control listener, the configured `port`'s first.
    public var allControl: [SocketAddress] { [control] + additionalControl }

    /// `tcp=HOST:PORT udp=HOST:PORT`, as recorded in the relay's liveness key.
    public var description: String {
        "tcp=\(AddressText.format(control) ?? "") udp=\(AddressText.format(datagram) ?? "")"
    }
}

/// A relay between start and stop: its engine and sockets.
private struct RunningRelay: Sendable {
    let configuration: RelayConfiguration
    let engine: NIOLoopBound<RelayEngine>
    let sockets: RelaySockets
    /// Reloads the access-token keys (nil: the relay takes no tokens).
    let keyWatch: Task<Void, Never>?
    var addresses: RelayAddresses { sockets.addresses }

    /// Stops accepting, drains (the core ends it: quiet period, no clients, or its timeout),
    /// withdraws the registrations and closes the sockets.
    func stopGracefully() async {
        keyWatch?.cancel()
        await sockets.stopListening()
        try? await engine.eventLoop.flatSubmit { engine.value.drain() }.get()
        let registrations = (try? await engine.eventLoop.submit { engine.value.statistics.connectedUsers }.get()) ?? 0
        do {
            try await engine.eventLoop.flatSubmit { engine.value.shutDown() }.get()
        } catch {
            configuration.logger.warning("could not remove registrations from Redis; they expire by TTL", metadata: ["error": "\(error)"])
        }
        await sockets.close()
        configuration.logger.info("relay stopped", metadata: ["relay": "\(configuration.relayId)", "sessions": "\(registrations)"])
    }

    func crash() async {
        keyWatch?.cancel()
        try? await engine.eventLoop.submit { engine.value.crash() }.get()
        await sockets.close()
        configuration.logger.notice("relay stopped without draining", metadata: ["relay": "\(configuration.relayId)"])
    }
}

/// The relay has been shut down.
public struct RelayStoppedError: Error, CustomStringConvertible {
    public var description: String { "the relay has been shut down" }
}

/// Why a relay could not start.
public struct RelayStartError: Error, CustomStringConvertible {
    public let description: String
    /// When the relay did not start because Redis did not answer: its address(es) as
    /// HOST:PORT[,HOST:PORT…], and the error of the attempt (for `SocketErrorText.reason`).
    public let unreachableRedis: (address: String, error: any Error)?

    init(_ description: String) {
        self.description = description
        unreachableRedis = nil
    }

    init(unreachable endpoint: RedisEndpoint, error: any Error) {
        let address: String
        switch endpoint {
        case .single(let url): address = "\(url.host):\(url.port)"
        case .cluster(let seeds): address = seeds.map { "\($0.host):\($0.port)" }.joined(separator: ",")
        }
        description = "cannot reach Redis at \(address) (\(error)); start Redis, or pass --redis"
        unreachableRedis = (address, error)
    }
}
