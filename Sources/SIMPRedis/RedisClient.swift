import CHiredis
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A Redis connection through hiredis that never blocks an event loop.
///
/// hiredis is a blocking client, so every call runs on the client's own thread, in order, and
/// the answer comes back as a future on the caller's event loop. Commands sent together with
/// `pipeline` share one round trip. A broken connection is re-established on the next call.
public final class RedisClient: @unchecked Sendable {
    public let url: RedisURL
    private let timeout: TimeAmount
    private let logger: Logger
    private let thread = NIOThreadPool(numberOfThreads: 1)
    /// Touched only on `thread`.
    private var context: UnsafeMutablePointer<redisContext>?
    private let roundTripCount = NIOLockedValueBox<Int>(0)

    /// - Parameter timeout: limit for connecting and for each reply.
    public init(url: RedisURL, timeout: TimeAmount = .seconds(2), logger: Logger = Logger(label: "simp.redis")) {
        self.url = url
        self.timeout = timeout
        self.logger = logger
        thread.start()
    }

    /// Round trips made so far (a pipeline counts once).
    public var roundTrips: Int { roundTripCount.withLockedValue { $0 } }

    /// Runs one command.
    public func command(_ arguments: [String], on eventLoop: EventLoop) -> EventLoopFuture<RedisValue> {
        pipeline([arguments], on: eventLoop).map { $0[0] }
    }

    /// Runs several commands in one round trip; replies come back in order. An error reply is
    /// returned as `.error`, not thrown; a connection failure fails the future.
    public func pipeline(_ commands: [[String]], on eventLoop: EventLoop) -> EventLoopFuture<[RedisValue]> {
        thread.runIfActive(eventLoop: eventLoop) { [self] in try runPipeline(commands) }
    }

    /// Runs commands whose arguments may be binary (e.g. PUBLISH of an encoded message) in
    /// one round trip.
    public func pipeline(bytes commands: [[[UInt8]]], on eventLoop: EventLoop) -> EventLoopFuture<[RedisValue]> {
        thread.runIfActive(eventLoop: eventLoop) { [self] in try runPipeline(bytes: commands) }
    }

    /// Runs one command.
    public func command(_ arguments: [String]) async throws -> RedisValue {
        try await pipeline([arguments])[0]
    }

    /// Runs several commands in one round trip.
    public func pipeline(_ commands: [[String]]) async throws -> [RedisValue] {
        try await thread.runIfActive { [self] in try runPipeline(commands) }
    }

    /// Closes the connection and stops the client's thread.
    public func shutdown() async {
        _ = try? await thread.runIfActive { [self] in disconnect() }
        try? await thread.shutdownGracefully()
    }

    // MARK: On the client's thread

    private func runPipeline(_ commands: [[String]]) throws -> [RedisValue] {
        try runPipeline(bytes: commands.map { $0.map { Array($0.utf8) } })
    }

    private func runPipeline(bytes commands: [[[UInt8]]]) throws -> [RedisValue] {
        let context = try connectedContext()
        for command in commands {
            let appended = withRedisArgv(command) { argc, argv, lengths in
                redisAppendCommandArgv(context, argc, argv, lengths)
            }
            guard appended == REDIS_OK else {
                throw failure(context, "could not queue \(String(decoding: command.first ?? [], as: UTF8.self))")
            }
        }
        roundTripCount.withLockedValue { $0 += 1 }
        var replies: [RedisValue] = []
        replies.reserveCapacity(commands.count)
        for _ in commands {
            var raw: UnsafeMutableRawPointer?
            guard redisGetReply(context, &raw) == REDIS_OK, let raw else {
                throw failure(context, "no reply")
            }
            let reply = raw.assumingMemoryBound(to: redisReply.self)
            replies.append(Self.value(of: reply))
            freeReplyObject(raw)
        }
        return replies
    }

    private func connectedContext() throws -> UnsafeMutablePointer<redisContext> {
        if let context { return context }
        let limit = timeval(tv_sec: Int(timeout.nanoseconds / 1_000_000_000),
                            tv_usec: Int(timeout.nanoseconds % 1_000_000_000 / 1000))
        guard let fresh = redisConnectWithTimeout(url.host, Int32(url.port), limit) else {
            throw RedisError("cannot reach Redis at \(url): out of memory")
        }
        if fresh.pointee.err != 0 {
            let reason = Self.errorText(fresh)
            redisFree(fresh)
            throw RedisError("cannot reach Redis at \(url): \(reason)")
        }
        redisSetTimeout(fresh, limit)
        context = fresh
        logger.debug("connected to Redis", metadata: ["redis": "\(url)"])
        if url.database != 0 {
            let reply = try runPipeline([["SELECT", String(url.database)]])[0]
            if case .error(let message) = reply { throw RedisError("Redis SELECT \(url.database) failed: \(message)") }
        }
        return fresh
    }

    /// Drops a broken connection (hiredis contexts cannot be reused after an I/O error).
    private func failure(_ context: UnsafeMutablePointer<redisContext>, _ what: String) -> RedisError {
        let error = RedisError("Redis at \(url): \(what): \(Self.errorText(context))")
        disconnect()
        return error
    }

    private func disconnect() {
        if let context { redisFree(context) }
        context = nil
    }

    static func errorText(_ context: UnsafeMutablePointer<redisContext>) -> String {
        withUnsafeBytes(of: context.pointee.errstr) { bytes in
            String(decoding: bytes.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
    }

    private static func value(of reply: UnsafeMutablePointer<redisReply>) -> RedisValue {
        let r = reply.pointee
        func text() -> String {
            guard let str = r.str else { return "" }
            return String(decoding: UnsafeRawBufferPointer(start: str, count: Int(r.len)), as: UTF8.self)
        }
        switch r.type {
        case REDIS_REPLY_STRING: return .string(text())
        case REDIS_REPLY_STATUS: return .status(text())
        case REDIS_REPLY_ERROR: return .error(text())
        case REDIS_REPLY_INTEGER: return .integer(r.integer)
        case REDIS_REPLY_ARRAY:
            return .array((0..<Int(r.elements)).map { value(of: r.element[$0]!) })
        default: return .null
        }
    }
}

/// Calls `body` with hiredis's argv form (count, pointers, lengths) of binary-safe arguments.
func withRedisArgv<R>(
    _ arguments: [[UInt8]],
    _ body: (Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>, UnsafePointer<Int>) -> R
) -> R {
    var storage = [CChar]()
    var offsets: [Int] = []
    var lengths: [Int] = []
    for argument in arguments {
        offsets.append(storage.count)
        lengths.append(argument.count)
        storage.append(contentsOf: argument.map { CChar(bitPattern: $0) })
        storage.append(0)
    }
    return storage.withUnsafeBufferPointer { chars in
        var argv: [UnsafePointer<CChar>?] = offsets.map { chars.baseAddress! + $0 }
        return argv.withUnsafeMutableBufferPointer { argvBuffer in
            body(Int32(arguments.count), argvBuffer.baseAddress!, lengths)
        }
    }
}
