import CHiredis
import Foundation
import Logging
import NIOConcurrencyHelpers

/// A Redis pub/sub subscription on a hiredis connection and a thread of its own.
///
/// The thread blocks in SUBSCRIBE (never on an event loop) and hands every message to
/// `onMessage` on that thread; the receiver hops to its own loop. A lost connection is
/// re-established (with `onSubscribed` called again: messages published meanwhile were lost,
/// since pub/sub is at most once). `stop()` unblocks the thread by shutting the socket down.
public final class RedisSubscriber: @unchecked Sendable {
    /// A message published on one of the channels.
    public typealias Handler = @Sendable (_ channel: String, _ payload: [UInt8]) -> Void

    public let url: RedisURL
    public let channels: [String]
    private let logger: Logger
    private let onSubscribed: @Sendable () -> Void
    private let onMessage: Handler
    /// The live context (to shut its socket down from `stop`) and whether to stop.
    private let state = NIOLockedValueBox<(context: UnsafeMutablePointer<redisContext>?, stopping: Bool)>((nil, false))
    private let finished = DispatchSemaphore(value: 0)
    private var thread: Thread?

    /// - Parameters:
    ///   - onSubscribed: called (on the subscriber's thread) each time all channels are subscribed.
    ///   - onMessage: called (on the subscriber's thread) with each message, in order.
    public init(url: RedisURL, channels: [String], logger: Logger = Logger(label: "simp.redis.subscriber"),
                onSubscribed: @escaping @Sendable () -> Void = {}, onMessage: @escaping Handler) {
        self.url = url
        self.channels = channels
        self.logger = logger
        self.onSubscribed = onSubscribed
        self.onMessage = onMessage
    }

    /// Starts the subscriber's thread.
    public func start() {
        let thread = Thread { [self] in run() }
        thread.name = "redis-subscriber"
        self.thread = thread
        thread.start()
    }

    /// Unsubscribes and waits for the thread to end.
    public func stop() async {
        guard thread != nil else { return }
        state.withLockedValue { state in
            state.stopping = true
            if let context = state.context { _ = shutdown(context.pointee.fd, Int32(SHUT_RDWR)) }
        }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async { [finished] in
                finished.wait()
                done.resume()
            }
        }
        thread = nil
    }

    private var stopping: Bool { state.withLockedValue { $0.stopping } }

    // MARK: On the subscriber's thread

    private func run() {
        var delay: UInt32 = 50_000
        while !stopping {
            if let context = connect() {
                delay = 50_000
                listen(on: context)
                state.withLockedValue { $0.context = nil }
                redisFree(context)
            }
            guard !stopping else { break }
            usleep(delay)
            delay = min(delay * 2, 1_000_000)
        }
        finished.signal()
    }

    /// Connects and sends SUBSCRIBE; nil (logged) on failure or when stopping.
    private func connect() -> UnsafeMutablePointer<redisContext>? {
        guard let context = redisConnectWithTimeout(url.host, Int32(url.port), timeval(tv_sec: 2, tv_usec: 0)) else { return nil }
        guard context.pointee.err == 0 else {
            logger.warning("cannot reach Redis for pub/sub", metadata: ["redis": "\(url)", "error": "\(RedisClient.errorText(context))"])
            redisFree(context)
            return nil
        }
        redisSetTimeout(context, timeval(tv_sec: 0, tv_usec: 0)) // block until a message comes
        let registered = state.withLockedValue { state -> Bool in
            guard !state.stopping else { return false }
            state.context = context
            return true
        }
        guard registered else { redisFree(context); return nil }
        // Channels are not per database, so no SELECT. A failed append shows up in listen().
        _ = withRedisArgv((["SUBSCRIBE"] + channels).map { Array($0.utf8) }) { redisAppendCommandArgv(context, $0, $1, $2) }
        return context
    }

    /// Reads replies until the connection fails or is shut down.
    private func listen(on context: UnsafeMutablePointer<redisContext>) {
        var subscribed = 0
        while true {
            var raw: UnsafeMutableRawPointer?
            guard redisGetReply(context, &raw) == REDIS_OK, let raw else {
                if !stopping {
                    logger.warning("Redis pub/sub connection lost; resubscribing", metadata: ["error": "\(RedisClient.errorText(context))"])
                }
                return
            }
            defer { freeReplyObject(raw) }
            let reply = raw.assumingMemoryBound(to: redisReply.self).pointee
            guard reply.type == REDIS_REPLY_ARRAY, reply.elements == 3 else { continue }
            let parts = (0..<3).map { Self.bytes(of: reply.element[$0]!.pointee) }
            switch String(decoding: parts[0], as: UTF8.self) {
            case "subscribe":
                subscribed += 1
                if subscribed == channels.count { onSubscribed() }
            case "message":
                onMessage(String(decoding: parts[1], as: UTF8.self), parts[2])
            default:
                continue
            }
        }
    }

    private static func bytes(of reply: redisReply) -> [UInt8] {
        guard let str = reply.str else { return [] }
        return Array(UnsafeRawBufferPointer(start: str, count: Int(reply.len)))
    }
}
