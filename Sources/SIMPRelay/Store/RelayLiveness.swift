import NIOConcurrencyHelpers
import NIOCore
import SIMPCore
import SIMPRedis

/// A relay's liveness record, `simp:relay:<relayId>` (docs/PROTOCOL.md §7.2): the one key per
/// relay that vouches for all the relay's registrations. Its value names the relay's current
/// **incarnation**, and every registration the relay writes carries it; a registration counts
/// only while its relay's record exists and names the same incarnation. A relay that dies stops
/// renewing the record, so all its users turn offline together when it expires, without one
/// write per user; a restarted relay reusing the id starts a new incarnation and so does not
/// vouch for its previous life's registrations.
///
/// The incarnation also changes whenever the relay finds its record missing (Redis restarted,
/// flushed or failed over, or the record expired while Redis was unreachable): registrations
/// that survived from before are then not vouched for until the relay writes them again, so a
/// reader's lazy clean-up of an old one can never remove a re-written one.
public final class RelayLiveness: Sendable {
    public let redis: any RedisCommands
    /// Seconds the record lives without a renewal.
    public let ttlSeconds: Int
    private let current = NIOLockedValueBox(RelayLiveness.newIncarnation())
    /// Whether the record was written yet: the first write is the relay's start, not a loss.
    private let started = NIOLockedValueBox(false)

    public init(redis: any RedisCommands, ttlSeconds: Int) {
        self.redis = redis
        self.ttlSeconds = ttlSeconds
    }

    /// The incarnation this relay's registrations are written with now.
    public var incarnation: String { current.withLockedValue { $0 } }

    /// A fresh incarnation: 64 random bits in hex.
    static func newIncarnation() -> String {
        let value = UInt64.random(in: .min ... .max)
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// The record's value: `incarnation=<hex> <description>`.
    static func recordValue(incarnation: String, description: String) -> String {
        description.isEmpty ? "incarnation=\(incarnation)" : "incarnation=\(incarnation) \(description)"
    }

    /// The incarnation a record's value names (nil: not a record of this version).
    static func incarnation(inRecord value: String) -> String? {
        value.split(separator: " ").first { $0.hasPrefix("incarnation=") }.map { String($0.dropFirst("incarnation=".count)) }
    }

    /// Renews relay `relayId`'s record (one command: `SET … XX GET`, so a missing record is not
    /// re-created with the old incarnation, which could vouch for registrations Redis kept from
    /// before). If the record was missing or named another incarnation, a new incarnation begins
    /// and is written, and the future holds true: every registration of this relay must be
    /// written again. The first renewal creates the record (over a previous life's, whose
    /// registrations it thereby stops vouching for) and answers false: the incarnation is new.
    public func renew(relayId: String, description: String, on eventLoop: EventLoop) -> EventLoopFuture<Bool> {
        let key = Registry.relayKey(relayId)
        let incarnation = self.incarnation
        if !started.withLockedValue({ $0 }) {
            let set = ["SET", key, Self.recordValue(incarnation: incarnation, description: description), "EX", String(ttlSeconds)]
            return redis.command(set, on: eventLoop).flatMapThrowing { [started] reply in
                try Registry.check([reply])
                started.withLockedValue { $0 = true }
                return false
            }
        }
        let set = ["SET", key, Self.recordValue(incarnation: incarnation, description: description), "EX", String(ttlSeconds), "XX", "GET"]
        return redis.command(set, on: eventLoop).flatMapThrowing { reply -> Bool in
            try Registry.check([reply])
            return reply.string.flatMap(Self.incarnation(inRecord:)) != incarnation
        }.flatMap { [redis, current, ttlSeconds] lost in
            guard lost else { return eventLoop.makeSucceededFuture(false) }
            let next = current.withLockedValue { value in
                if value == incarnation { value = Self.newIncarnation() }
                return value
            }
            let value = Self.recordValue(incarnation: next, description: description)
            return redis.command(["SET", key, value, "EX", String(ttlSeconds)], on: eventLoop).flatMapThrowing { reply in
                try Registry.check([reply])
                return true
            }
        }
    }

    /// The incarnation each of `relayIds` is alive in (absent: its record is missing), in one
    /// round trip.
    public func liveIncarnations(of relayIds: Set<String>, on eventLoop: EventLoop) -> EventLoopFuture<[String: String]> {
        let ids = relayIds.sorted()
        guard !ids.isEmpty else { return eventLoop.makeSucceededFuture([:]) }
        return redis.pipeline(ids.map { ["GET", Registry.relayKey($0)] }, on: eventLoop).flatMapThrowing { replies in
            try Registry.check(replies)
            var live: [String: String] = [:]
            for (id, reply) in zip(ids, replies) {
                if let incarnation = reply.string.flatMap(Self.incarnation(inRecord:)) { live[id] = incarnation }
            }
            return live
        }
    }
}
