import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL

/// A connection to one Redis server on a SwiftNIO event loop, hiredis as the RESP codec.
///
/// Every call is written on the client's event loop (pass the relay's own loop and nothing
/// hops threads); commands sent together with `pipeline` share one flush and one round trip,
/// and many pipelines may be in flight at once. A lost connection is re-established on the next
/// call; after a failed attempt, calls fail at once until the backoff (50 ms doubling to 1 s)
/// has passed. An outage is logged once, and again when Redis answers again.
public final class RedisClient: RedisCommands {
    public let url: RedisURL
    public let eventLoop: EventLoop
    private let timeout: TimeAmount
    private let logger: Logger
    private let state: NIOLoopBoundBox<State>
    private let roundTripCount = NIOLockedValueBox<Int>(0)

    private struct State {
        /// The open connection.
        var connection: RedisConnection?
        /// Set while connecting: the requests made meanwhile, written in order once connected.
        var queued: [(commands: [[[UInt8]]], promise: EventLoopPromise<[RedisValue]>)]?
        var tlsContext: NIOSSLContext?
        var outage = Outage()
        var closed = false
        /// Whether a connection ever opened: until then a failure is the caller's to report
        /// (a relay that cannot reach Redis at start says so and exits), not an outage to log.
        var hasConnected = false
    }

    /// - Parameters:
    ///   - timeout: limit for connecting and for each reply.
    ///   - eventLoop: where the connection lives; futures still complete on the loop each call names.
    public init(
        url: RedisURL, timeout: TimeAmount = .seconds(2), logger: Logger = Logger(label: "simp.redis"),
        eventLoop: EventLoop = MultiThreadedEventLoopGroup.singleton.next()
    ) {
        self.url = url
        self.timeout = timeout
        self.logger = logger
        self.eventLoop = eventLoop
        self.state = .makeBoxSendingValue(State(), eventLoop: eventLoop)
    }

    /// Round trips made so far (a pipeline counts once).
    public var roundTrips: Int { roundTripCount.withLockedValue { $0 } }

    /// Not a cluster.
    public var isCluster: Bool { false }

    /// This server.
    public func masters() -> EventLoopFuture<[any RedisCommands]> { eventLoop.makeSucceededFuture([self]) }

    /// Runs commands whose arguments may be binary in one round trip; replies in order.
    public func pipeline(bytes commands: [[[UInt8]]], on eventLoop: EventLoop) -> EventLoopFuture<[RedisValue]> {
        self.eventLoop.run(answeringOn: eventLoop) { self.send(commands) }
    }

    /// Closes the connection; later calls fail.
    public func shutdown() async {
        let connection = try? await eventLoop.submit { () -> RedisConnection? in
            self.state.value.closed = true
            return self.state.value.connection
        }.get()
        if let connection {
            connection.close()
            try? await connection.channel.closeFuture.get()
        }
    }

    // MARK: On the event loop

    /// Writes at once on an open connection; otherwise queues behind a connection attempt
    /// (unless backing off), so requests keep the order they were made in.
    private func send(_ commands: [[[UInt8]]]) -> EventLoopFuture<[RedisValue]> {
        if state.value.closed { return eventLoop.makeFailedFuture(RedisError("Redis client for \(url) is shut down")) }
        if let connection = state.value.connection { return write(commands, on: connection) }
        if state.value.queued == nil, let waiting = state.value.outage.refusal(now: .now()) {
            return eventLoop.makeFailedFuture(RedisError("cannot reach Redis at \(url): \(waiting)", unavailable: true))
        }
        let promise = eventLoop.makePromise(of: [RedisValue].self)
        if state.value.queued != nil {
            state.value.queued!.append((commands, promise))
            return promise.futureResult
        }
        state.value.queued = [(commands, promise)]
        connect()
        return promise.futureResult
    }

    private func write(_ commands: [[[UInt8]]], on connection: RedisConnection) -> EventLoopFuture<[RedisValue]> {
        roundTripCount.withLockedValue { $0 += 1 }
        return connection.send(commands)
    }

    private func connect() {
        let attempt: EventLoopFuture<RedisConnection>
        do {
            attempt = RedisConnection.connect(to: url, tlsContext: try tls(), on: eventLoop, timeout: timeout)
        } catch {
            return connected(.failure(error))
        }
        attempt.whenComplete { self.connected($0) }
    }

    private func connected(_ result: Result<RedisConnection, Error>) {
        let queued = state.value.queued ?? []
        state.value.queued = nil
        switch result {
        case .success(let connection):
            guard !state.value.closed else {
                connection.close()
                for request in queued { request.promise.fail(RedisError("Redis client for \(url) is shut down")) }
                return
            }
            state.value.outage.recovered(logger: logger, what: "Redis at \(url)")
            state.value.hasConnected = true
            state.value.connection = connection
            connection.channel.closeFuture.whenComplete { _ in
                if self.state.value.connection?.channel === connection.channel { self.state.value.connection = nil }
            }
            for request in queued { write(request.commands, on: connection).cascade(to: request.promise) }
        case .failure(let error):
            state.value.outage.failed(error, now: .now(), logger: logger, what: "Redis at \(url)", announce: state.value.hasConnected)
            let reported = error is RedisError ? error : RedisError("cannot reach Redis at \(url): \(error)", unavailable: true)
            for request in queued { request.promise.fail(reported) }
        }
    }

    private func tls() throws -> NIOSSLContext? {
        guard let settings = url.tls else { return nil }
        if let context = state.value.tlsContext { return context }
        let context = try settings.makeContext()
        state.value.tlsContext = context
        return context
    }
}

/// Backoff between connection attempts and the log of an outage: one warning when Redis
/// becomes unreachable, one notice when it answers again.
struct Outage {
    private(set) var since: NIODeadline?
    private var retryAt: NIODeadline?
    private var delay = TimeAmount.milliseconds(50)
    private var lastError = ""
    static let maximumDelay = TimeAmount.seconds(1)

    /// Why not to try now (still backing off), or nil.
    func refusal(now: NIODeadline) -> String? {
        guard let retryAt, now < retryAt else { return nil }
        return "\(lastError) (retrying in \((retryAt - now).nanoseconds / 1_000_000) ms)"
    }

    /// The delay before the next attempt after a failure now; the first failure of an outage
    /// is logged if `announce` (and then its end too).
    mutating func failed(_ error: Error, now: NIODeadline, logger: Logger, what: String, announce: Bool = true) {
        lastError = "\(error)"
        if since == nil, announce {
            since = now
            logger.warning(
                "\(what) is unreachable; retrying in the background, next message when it is back",
                metadata: ["error": "\(error)"])
        }
        retryAt = now + delay
        delay = min(delay * 2, Self.maximumDelay)
    }

    /// The wait before the next attempt (for callers that retry on their own).
    var nextDelay: TimeAmount { delay }

    mutating func recovered(logger: Logger, what: String) {
        if let since {
            let seconds = Double((NIODeadline.now() - since).nanoseconds) / 1e9
            logger.notice("\(what) is reachable again", metadata: ["down_seconds": "\(Int(seconds.rounded()))"])
        }
        self = Outage()
    }
}
