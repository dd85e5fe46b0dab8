import Logging
import NIOCore

/// Pub/sub on Redis Cluster: each sharded channel (`SSUBSCRIBE`) on the master serving its
/// slot, classic channels (`SUBSCRIBE`, broadcast over the cluster bus) on the first master.
///
/// When a node's subscription breaks (the node died, or its slot moved away and Redis sent
/// `sunsubscribe`), the whole subscription is rebuilt from a fresh slot map, with backoff, and
/// `onSubscribed` is called again once every channel is back (messages in between are lost,
/// as with any pub/sub reconnection). Callbacks run on `eventLoop`.
public final class RedisClusterSubscriber: Sendable {
    public let channels: [String]
    public let shardChannels: [String]
    public let eventLoop: EventLoop
    private let cluster: RedisClusterClient
    private let logger: Logger
    private let onSubscribed: @Sendable () -> Void
    private let onMessage: RedisSubscriber.Handler
    private let state: NIOLoopBoundBox<State>

    private struct State {
        var generation = 0
        var nodes: [RedisSubscriber] = []
        var pending = 0
        var readiness = Readiness()
        var outage = Outage()
        var stopping = false
    }

    /// - Parameters:
    ///   - cluster: the client whose slot map places the channels.
    ///   - channels: classic channels (`SUBSCRIBE`).
    ///   - shardChannels: sharded channels (`SSUBSCRIBE`), placed by slot.
    public init(
        cluster: RedisClusterClient, channels: [String], shardChannels: [String],
        eventLoop: EventLoop? = nil, logger: Logger = Logger(label: "simp.redis.subscriber"),
        onSubscribed: @escaping @Sendable () -> Void = {}, onMessage: @escaping RedisSubscriber.Handler
    ) {
        self.cluster = cluster
        self.channels = channels
        self.shardChannels = shardChannels
        self.eventLoop = eventLoop ?? cluster.eventLoop
        self.logger = logger
        self.onSubscribed = onSubscribed
        self.onMessage = onMessage
        self.state = .makeBoxSendingValue(State(), eventLoop: self.eventLoop)
    }

    /// Subscribes in the background (see `waitUntilSubscribed`).
    public func start() {
        eventLoop.execute { self.build() }
    }

    /// Waits until every channel is subscribed on its node.
    public func waitUntilSubscribed(timeout: TimeAmount = .seconds(5)) async throws {
        let promise = eventLoop.makePromise(of: Void.self)
        eventLoop.execute {
            self.state.value.readiness.wait(promise, timeout: timeout, on: self.eventLoop) {
                RedisError("could not subscribe to Redis Cluster pub/sub within \(timeout.nanoseconds / 1_000_000) ms")
            }
        }
        try await promise.futureResult.get()
    }

    /// Closes every node's subscription.
    public func stop() async {
        let nodes = try? await eventLoop.submit { () -> [RedisSubscriber] in
            self.state.value.stopping = true
            return self.state.value.nodes
        }.get()
        for node in nodes ?? [] { await node.stop() }
    }

    // MARK: On the event loop

    /// Places every channel by the current slot map and subscribes node by node.
    private func build() {
        guard !state.value.stopping else { return }
        state.value.generation += 1
        let generation = state.value.generation
        let placed = EventLoopFuture.whenAllSucceed(
            shardChannels.map { channel in cluster.masterURL(forKey: channel).map { ($0, channel) } }
                + [cluster.masterURL(forKey: channels.first ?? "")].map { $0.map { ($0, "") } },
            on: eventLoop)
        placed.hop(to: eventLoop).whenComplete { result in
            guard generation == self.state.value.generation, !self.state.value.stopping else { return }
            switch result {
            case .failure(let error):
                self.rebuild(after: error)
            case .success(let placements):
                self.subscribe(placements, generation: generation)
            }
        }
    }

    private func subscribe(_ placements: [(RedisURL, String)], generation: Int) {
        let classicNode = placements.last!.0
        var byNode: [RedisURL: [String]] = [:]
        for (url, channel) in placements.dropLast() { byNode[url, default: []].append(channel) }
        if !channels.isEmpty, byNode[classicNode] == nil { byNode[classicNode] = [] }
        for node in state.value.nodes { Task { await node.stop() } }
        state.value.pending = byNode.count
        state.value.nodes = byNode.map { url, shard in
            RedisSubscriber(
                url: url, channels: url == classicNode ? channels : [], shardChannels: shard,
                eventLoop: eventLoop, logger: logger,
                onSubscribed: { self.nodeSubscribed(generation) },
                onMessage: onMessage,
                onLost: { self.eventLoop.execute { self.nodeLost(generation) } })
        }
        for node in state.value.nodes { node.start() }
    }

    private func nodeSubscribed(_ generation: Int) {
        guard generation == state.value.generation else { return }
        state.value.pending -= 1
        guard state.value.pending == 0 else { return }
        state.value.outage.recovered(logger: logger, what: "Redis Cluster pub/sub")
        onSubscribed()
        state.value.readiness.becameReady()
    }

    private func nodeLost(_ generation: Int) {
        guard generation == state.value.generation, !state.value.stopping else { return }
        rebuild(after: RedisError("a node's subscription broke"))
    }

    /// Drops every node's subscription and builds them again from a fresh slot map.
    private func rebuild(after error: Error) {
        state.value.generation += 1
        state.value.readiness.lost()
        let old = state.value.nodes
        state.value.nodes = []
        for node in old { Task { await node.stop() } }
        let delay = state.value.outage.nextDelay
        state.value.outage.failed(error, now: .now(), logger: logger, what: "Redis Cluster pub/sub")
        let generation = state.value.generation
        cluster.refreshSlots().hop(to: eventLoop).whenComplete { _ in
            self.eventLoop.scheduleTask(in: delay) {
                if generation == self.state.value.generation { self.build() }
            }
        }
    }
}
