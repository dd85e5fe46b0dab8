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
    /// Whether this is a Redis Cluster: keys must then be hash-tagged so that what one command,
    /// script or `MULTI` touches shares a slot, and per-relay channels use sharded pub/sub.
    var isCluster: Bool { get }
    /// The servers that hold the keys, each as a client of its own (for `SCAN`, `DBSIZE`, …):
    /// the server itself, or every master of a cluster at the time of the call.
    func masters() -> EventLoopFuture<[any RedisCommands]>
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

extension RedisCommands {
    /// Every key matching `pattern` (a `SCAN … MATCH` glob) on every master, optionally of one
    /// `type`; a key may be missed or repeated if it is created, deleted or moved meanwhile, as
    /// with any `SCAN`.
    public func scanKeys(matching pattern: String, type: String? = nil, count: Int = 500) async throws -> [String] {
        var keys: [String] = []
        for master in try await masters().get() {
            var cursor = "0"
            repeat {
                let page = try await master.scanPage(cursor: cursor, matching: pattern, type: type, count: count, on: master.eventLoop).get()
                cursor = page.cursor
                keys += page.keys
            } while cursor != "0"
        }
        return keys
    }

    /// One `SCAN` step on this server: the next cursor ("0" when the sweep is complete) and the keys found.
    public func scanPage(
        cursor: String, matching pattern: String, type: String? = nil, count: Int,
        on eventLoop: EventLoop
    ) -> EventLoopFuture<(cursor: String, keys: [String])> {
        let command = ["SCAN", cursor, "MATCH", pattern, "COUNT", String(count)] + (type.map { ["TYPE", $0] } ?? [])
        return self.command(command, on: eventLoop).flatMapThrowing { reply in
            guard let parts = reply.array, parts.count == 2, let next = parts[0].string, let keys = parts[1].array else {
                throw RedisError("unexpected SCAN reply \(reply)")
            }
            return (next, keys.compactMap(\.string))
        }
    }
}
