import Logging
import NIOCore
import NIOPosix
import SIMPRedis

/// Commands executed and memory used by a Redis (every master of a cluster, summed), from
/// `INFO stats` (`total_commands_processed`, which counts the commands a Lua script runs too)
/// and `INFO memory` (`used_memory`).
public struct RedisStats: Equatable, Sendable {
    public var commandsProcessed: Int
    public var usedMemoryBytes: Int
    /// When the figures were read.
    public var at: NIODeadline

    /// Reads the figures of `endpoint`; nil if it cannot be reached.
    public static func read(_ endpoint: RedisEndpoint) async -> RedisStats? {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let redis = endpoint.makeClient(eventLoop: loop, logger: Logger(label: "simp-bench.redis-stats"))
        let stats = try? await collect(from: redis, on: loop)
        await redis.shutdown() // the masters' connections are the client's own
        return stats
    }

    private static func collect(from redis: any RedisCommands, on loop: EventLoop) async throws -> RedisStats {
        var stats = RedisStats(commandsProcessed: 0, usedMemoryBytes: 0, at: .now())
        for server in try await redis.masters().get() {
            let replies = try await server.pipeline([["INFO", "stats"], ["INFO", "memory"]], on: loop).get()
            stats.commandsProcessed += field("total_commands_processed", in: replies[0].string ?? "") ?? 0
            stats.usedMemoryBytes += field("used_memory", in: replies[1].string ?? "") ?? 0
        }
        return stats
    }

    /// The integer value of `name` in an `INFO` reply (`name:value` lines).
    static func field(_ name: String, in info: String) -> Int? {
        for line in info.split(whereSeparator: \.isNewline) where line.hasPrefix(name + ":") {
            return Int(line.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }
}
