import Crypto
import NIOCore

/// A Lua script run by `EVALSHA` (the source crosses the network once per server, not per call).
///
/// When a server answers `NOSCRIPT` (it restarted, failed over, or never saw the script), the
/// call is sent again as `SCRIPT LOAD` followed by `EVALSHA`, in one round trip; on Redis Cluster
/// both go to the node owning the call's first key (`RedisClusterClient` routes a keyless command
/// with the keyed command after it).
public struct RedisScript: Sendable, Hashable {
    public let source: String
    /// The SHA-1 of the source in hex, as `SCRIPT LOAD` answers it.
    public let sha1: String

    public init(_ source: String) {
        self.source = source
        self.sha1 = Insecure.SHA1.hash(data: Array(source.utf8)).map(Self.hex).joined()
    }

    private static func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789abcdef")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0xf)]])
    }

    /// One `EVALSHA` call.
    public struct Call: Sendable {
        public var keys: [String]
        public var arguments: [String]
        public init(keys: [String], arguments: [String] = []) {
            self.keys = keys
            self.arguments = arguments
        }
    }

    /// The `EVALSHA` command for `call`.
    public func command(_ call: Call) -> [String] {
        ["EVALSHA", sha1, String(call.keys.count)] + call.keys + call.arguments
    }

    /// Runs the script once.
    public func run(_ call: Call, on redis: any RedisCommands, eventLoop: EventLoop) -> EventLoopFuture<RedisValue> {
        run([call], on: redis, eventLoop: eventLoop).map { $0[0] }
    }

    /// Runs several calls in one pipeline; replies in order. Calls answered `NOSCRIPT` are sent
    /// again behind a `SCRIPT LOAD`.
    public func run(_ calls: [Call], on redis: any RedisCommands, eventLoop: EventLoop) -> EventLoopFuture<[RedisValue]> {
        redis.pipeline(calls.map(command), on: eventLoop).flatMap { replies in
            let missing = replies.indices.filter { replies[$0].errorMessage?.hasPrefix("NOSCRIPT") == true }
            guard !missing.isEmpty else { return eventLoop.makeSucceededFuture(replies) }
            let retried = missing.flatMap { [["SCRIPT", "LOAD", source], command(calls[$0])] }
            return redis.pipeline(retried, on: eventLoop).map { again in
                var replies = replies
                for (position, index) in missing.enumerated() {
                    let load = again[2 * position]
                    replies[index] = load.errorMessage != nil ? load : again[2 * position + 1]
                }
                return replies
            }
        }
    }
}
