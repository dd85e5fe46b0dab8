import Logging
import NIOCore
import NIOPosix
import NIOSSL

/// A Redis pub/sub subscription on a SwiftNIO connection of its own: classic channels
/// (`SUBSCRIBE`) and sharded channels (`SSUBSCRIBE`, Redis 7) on one server.
///
/// Messages and `onSubscribed` are called on `eventLoop` (pass the relay's loop: no hop). A lost
/// connection is re-established with backoff (50 ms doubling to 1 s) and `onSubscribed` is
/// called again: messages published meanwhile were lost, since pub/sub is at most once.
/// For Redis Cluster use `RedisClusterSubscriber`.
public final class RedisSubscriber: Sendable {
    /// A message published on one of the channels.
    public typealias Handler = @Sendable (_ channel: String, _ payload: [UInt8]) -> Void

    public let url: RedisURL
    public let channels: [String]
    public let shardChannels: [String]
    public let eventLoop: EventLoop
    private let logger: Logger
    private let onSubscribed: @Sendable () -> Void
    private let onMessage: Handler
    /// Called instead of reconnecting when the subscription breaks (for the cluster subscriber).
    private let onLost: (@Sendable () -> Void)?
    private let state: NIOLoopBoundBox<State>

    private struct State {
        var connection: RedisConnection?
        var confirmed = 0
        var readiness = Readiness()
        var outage = Outage()
        var started = false
        var stopping = false
    }

    /// - Parameters:
    ///   - channels: classic channels (`SUBSCRIBE`).
    ///   - shardChannels: sharded channels (`SSUBSCRIBE`); on Redis Cluster they must all hash to
    ///     slots of this server.
    ///   - onSubscribed: called on `eventLoop` each time every channel is subscribed.
    ///   - onMessage: called on `eventLoop` with each message, in order.
    public convenience init(
        url: RedisURL, channels: [String], shardChannels: [String] = [],
        eventLoop: EventLoop = MultiThreadedEventLoopGroup.singleton.next(),
        logger: Logger = Logger(label: "simp.redis.subscriber"),
        onSubscribed: @escaping @Sendable () -> Void = {}, onMessage: @escaping Handler
    ) {
        self.init(
            url: url, channels: channels, shardChannels: shardChannels, eventLoop: eventLoop, logger: logger,
            onSubscribed: onSubscribed, onMessage: onMessage, onLost: nil)
    }

    init(
        url: RedisURL, channels: [String], shardChannels: [String], eventLoop: EventLoop, logger: Logger,
        onSubscribed: @escaping @Sendable () -> Void, onMessage: @escaping Handler, onLost: (@Sendable () -> Void)?
    ) {
        self.url = url
        self.channels = channels
        self.shardChannels = shardChannels
        self.eventLoop = eventLoop
        self.logger = logger
        self.onSubscribed = onSubscribed
        self.onMessage = onMessage
        self.onLost = onLost
        self.state = .makeBoxSendingValue(State(), eventLoop: eventLoop)
    }

    /// Connects and subscribes (in the background; see `waitUntilSubscribed`).
    public func start() {
        eventLoop.execute {
            guard !self.state.value.started else { return }
            self.state.value.started = true
            self.connect()
        }
    }

    /// Waits until every channel is subscribed (so nothing published afterwards is missed).
    public func waitUntilSubscribed(timeout: TimeAmount = .seconds(5)) async throws {
        let promise = eventLoop.makePromise(of: Void.self)
        eventLoop.execute {
            self.state.value.readiness.wait(promise, timeout: timeout, on: self.eventLoop) {
                RedisError("could not subscribe to Redis pub/sub at \(self.url) within \(timeout.nanoseconds / 1_000_000) ms")
            }
        }
        try await promise.futureResult.get()
    }

    /// Closes the subscription; no message is delivered after this returns.
    public func stop() async {
        let closed = eventLoop.flatSubmit { () -> EventLoopFuture<Void> in
            self.state.value.stopping = true
            guard let connection = self.state.value.connection else { return self.eventLoop.makeSucceededVoidFuture() }
            connection.close()
            return connection.channel.closeFuture
        }
        try? await closed.get()
    }

    // MARK: On the event loop

    private func connect() {
        guard !state.value.stopping else { return }
        let tlsContext: NIOSSLContext?
        do { tlsContext = try url.tls?.makeContext() } catch { return retry(after: error) }
        RedisConnection.connect(to: url, tlsContext: tlsContext, on: eventLoop, timeout: .seconds(2)) { push in
            self.received(push)
        }.whenComplete { result in
            switch result {
            case .success(let connection):
                guard !self.state.value.stopping else { return connection.close() }
                self.state.value.outage.recovered(logger: self.logger, what: "Redis pub/sub at \(self.url)")
                self.state.value.connection = connection
                self.state.value.confirmed = 0
                var commands: [[String]] = []
                if !self.channels.isEmpty { commands.append(["SUBSCRIBE"] + self.channels) }
                // One SSUBSCRIBE per channel: on a cluster, one command's channels must share a slot.
                commands += self.shardChannels.map { ["SSUBSCRIBE", $0] }
                connection.sendForPushes(commands)
                connection.channel.closeFuture.whenComplete { _ in self.lost(RedisError("connection closed")) }
            case .failure(let error):
                self.retry(after: error)
            }
        }
    }

    private func received(_ push: RedisPush) {
        guard !state.value.stopping else { return }
        switch push {
        case .message(let channel, let payload):
            onMessage(channel, payload)
        case .reply(let reply):
            let kind = reply.array?.first?.string
            if kind == "subscribe" || kind == "ssubscribe" {
                state.value.confirmed += 1
                if state.value.confirmed == channels.count + shardChannels.count { subscribed() }
            } else if kind == "sunsubscribe" || reply.errorMessage != nil {
                // A sharded channel's slot moved to another node (or SSUBSCRIBE was refused).
                logger.notice("Redis pub/sub at \(url) ended a subscription", metadata: ["reply": "\(reply)"])
                state.value.connection?.close()
            }
        }
    }

    private func subscribed() {
        onSubscribed()
        state.value.readiness.becameReady()
    }

    private func lost(_ error: Error) {
        state.value.connection = nil
        state.value.readiness.lost()
        guard !state.value.stopping else { return }
        retry(after: error)
    }

    private func retry(after error: Error) {
        guard !state.value.stopping else { return }
        if let onLost { return onLost() }
        let delay = state.value.outage.nextDelay
        state.value.outage.failed(error, now: .now(), logger: logger, what: "Redis pub/sub at \(url)")
        eventLoop.scheduleTask(in: delay) { self.connect() }
    }
}
