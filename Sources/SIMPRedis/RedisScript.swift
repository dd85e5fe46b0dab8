import Crypto
import NIOCore

/// A Lua script run by `EVALSHA` (the source crosses the network once per server, not per call).
///
/// When a server answers `NOSCRIPT` (it restarted, failed over, was flushed, or never saw the
/// script), the call is sent again as `EVAL` with the source, in one more round trip; `EVAL`
/// also caches the script there, so later calls go by `EVALSHA` again. `EVAL` carries the
/// call's keys, so on Redis Cluster it is routed, redirected (`MOVED`/`ASK`) and retried like
/// any keyed command and loads the script on the very node that runs the call; a separate
/// keyless `SCRIPT LOAD` could land on another node.
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
        /// Binary arguments, after `arguments` (sent as they are, e.g. a sealed file chunk).
        public var binaryArguments: [[UInt8]]
        public init(keys: [String], arguments: [String] = [], binaryArguments: [[UInt8]] = []) {
            self.keys = keys
            self.arguments = arguments
            self.binaryArguments = binaryArguments
        }
    }

    /// The `EVALSHA` command for `call` (without its `binaryArguments`).
    public func command(_ call: Call) -> [String] {
        ["EVALSHA", sha1, String(call.keys.count)] + call.keys + call.arguments
    }

    /// The `EVAL` command for `call` (sends the source; used after `NOSCRIPT`).
    public func evalCommand(_ call: Call) -> [String] {
        ["EVAL", source, String(call.keys.count)] + call.keys + call.arguments
    }

    /// A command's text arguments as bytes, with `call`'s binary arguments after them.
    private static func bytes(_ command: [String], _ call: Call) -> [[UInt8]] {
        command.map { Array($0.utf8) } + call.binaryArguments
    }

    /// Runs the script once.
    public func run(_ call: Call, on redis: any RedisCommands, eventLoop: EventLoop) -> EventLoopFuture<RedisValue> {
        run([call], on: redis, eventLoop: eventLoop).map { $0[0] }
    }

    /// Runs several calls in one pipeline, after `commands` (other commands sent in the same
    /// round trip); replies in order, those of `commands` first. Calls answered `NOSCRIPT` are
    /// sent again as `EVAL`.
    public func run(
        _ calls: [Call], after commands: [[String]] = [], on redis: any RedisCommands,
        eventLoop: EventLoop
    ) -> EventLoopFuture<[RedisValue]> {
        let text = commands.map { $0.map { Array($0.utf8) } }
        return redis.pipeline(bytes: text + calls.map { Self.bytes(command($0), $0) }, on: eventLoop).flatMap { replies in
            let missing = calls.indices.filter { replies[commands.count + $0].errorMessage?.hasPrefix("NOSCRIPT") == true }
            guard !missing.isEmpty else { return eventLoop.makeSucceededFuture(replies) }
            return redis.pipeline(bytes: missing.map { Self.bytes(evalCommand(calls[$0]), calls[$0]) }, on: eventLoop).map { again in
                var replies = replies
                for (index, reply) in zip(missing, again) { replies[commands.count + index] = reply }
                return replies
            }
        }
    }
}
