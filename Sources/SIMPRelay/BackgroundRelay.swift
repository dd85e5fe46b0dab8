import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle

/// A relay running in the background of this process, for tests, simp-lab and simp-bench: its
/// `RelayService` runs in a `ServiceGroup` of its own. `shutdown()` triggers the graceful
/// shutdown (drain, withdraw) and waits for it; `crash()` cancels the service, as a killed
/// process would stop.
public final class BackgroundRelay: Sendable {
    /// The relay's first (with `threads` 1, only) relay core.
    public var service: RelayService { shards.relays[0] }
    /// Every relay core of the relay: `configuration.threads` of them.
    public let shards: RelayShards
    /// Where the relay listens.
    public let addresses: RelayAddresses
    private let serviceGroup: ServiceGroup
    private let task: Task<Void, Error>

    private init(shards: RelayShards, addresses: RelayAddresses, serviceGroup: ServiceGroup, task: Task<Void, Error>) {
        self.shards = shards
        self.addresses = addresses
        self.serviceGroup = serviceGroup
        self.task = task
    }

    /// Starts a relay and returns once it listens (or throws why it could not start).
    public static func start(
        configuration: RelayConfiguration, group: EventLoopGroup = MultiThreadedEventLoopGroup.singleton, store: (any RelayStore)? = nil
    ) async throws -> BackgroundRelay {
        let shards = RelayShards(configuration: configuration, group: group, store: store)
        let serviceGroup = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: shards)], logger: configuration.logger))
        let task = Task { try await serviceGroup.run() }
        do {
            return BackgroundRelay(shards: shards, addresses: try await shards.addresses(), serviceGroup: serviceGroup, task: task)
        } catch {
            _ = await task.result
            throw error
        }
    }

    public var configuration: RelayConfiguration { shards.configuration }
    /// The bound control address.
    public var controlAddress: SocketAddress? { addresses.control }
    /// The bound datagram address.
    public var datagramAddress: SocketAddress? { addresses.datagram }
    /// The bound Prometheus endpoint, if any.
    public var metricsAddress: SocketAddress? { addresses.metrics }
    /// Store round trips made by this relay so far.
    public var redisRoundTrips: Int { service.storeRoundTrips }

    /// A snapshot of the relay's counters; throws `RelayStoppedError` once it stopped.
    public func statistics() async throws -> RelayStatistics {
        try await service.statistics()
    }

    /// Stops gracefully and waits until the relay has stopped.
    public func shutdown() async {
        await serviceGroup.triggerGracefulShutdown()
        _ = await task.result
    }

    /// Stops at once, draining and withdrawing nothing.
    public func crash() async {
        task.cancel()
        _ = await task.result
    }
}
