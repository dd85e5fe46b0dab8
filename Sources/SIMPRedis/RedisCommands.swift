import NIOCore

/// What the relay needs from Redis, implemented by `RedisClient` (one server) and
/// `RedisClusterClient` (Redis Cluster, commands routed by key slot).
///
/// Replies come back in the order of the commands. An error reply is returned as `.error`, not
/// thrown; a connection failure fails the future.
public protocol RedisCommands: AnyObject, Sendable {
    /// The loop the client's connections run on (the async calls complete there first).
    var eventLoop: EventLoop { get }
    /// Runs several commands in one round trip per server involved; the future completes on `eventLoop`.
    func pipeline(_ commands: [[String]], on eventLoop: EventLoop) -> EventLoopFuture<[RedisValue]>
    /// The same with binary-safe arguments (e.g. PUBLISH of an encoded message).
    func pipeline(bytes commands: [[[UInt8]]], on eventLoop: EventLoop) -> EventLoopFuture<[RedisValue]>
    /// Round trips made so far (a pipeline counts once per server it went to).
    var roundTrips: Int { get }
    /// Closes every connection; later calls fail.
    func shutdown() async
}

extension RedisCommands {
    public func pipeline(_ commands: [[String]], on eventLoop: EventLoop) -> EventLoopFuture<[RedisValue]> {
        pipeline(bytes: commands.map { $0.map { Array($0.utf8) } }, on: eventLoop)
    }

    /// Runs one command.
    public func command(_ arguments: [String], on eventLoop: EventLoop) -> EventLoopFuture<RedisValue> {
        pipeline([arguments], on: eventLoop).map { $0[0] }
    }

    /// Runs one command.
    public func command(_ arguments: [String]) async throws -> RedisValue {
        try await pipeline([arguments])[0]
    }

    /// Runs several commands in one round trip (per server).
    public func pipeline(_ commands: [[String]]) async throws -> [RedisValue] {
        try await pipeline(commands, on: eventLoop).get()
    }

    /// Runs binary-safe commands in one round trip (per server).
    public func pipeline(bytes commands: [[[UInt8]]]) async throws -> [RedisValue] {
        try await pipeline(bytes: commands, on: eventLoop).get()
    }
}
