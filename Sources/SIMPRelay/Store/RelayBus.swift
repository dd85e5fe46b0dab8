import NIOCore
import SIMPCore
import SIMPRedis

/// The Redis side of many relays on one Redis or one Redis Cluster (docs/PROTOCOL.md §7.7): each
/// relay's delivery channel, the moves channel, and the registry of live relays.
///
/// - `simp:relay:{<relayId>}:deliver` (channel): `RelayDelivery` envelopes for users on that
///   relay; `PUBLISH` on one Redis, sharded `SPUBLISH` on a cluster (one shard per delivery).
/// - `simp:relays:moves` (channel): `UserMove` announcements, `<relayId> <userId>`; classic
///   `PUBLISH` everywhere, so on a cluster every node (and every relay) hears it.
/// - `simp:relay:<relayId>` (key, written by `RelayLiveness.renew`): the relay's incarnation and addresses;
///   its TTL is the relay's heartbeat.
public struct RelayBus: Sendable {
    public let redis: any RedisCommands

    public init(redis: any RedisCommands) { self.redis = redis }

    /// The channel relay `relayId` receives deliveries on.
    public static func deliveryChannel(_ relayId: String) -> String { "simp:relay:{\(relayId)}:deliver" }
    /// The channel every relay receives moves on.
    public static let movesChannel = "simp:relays:moves"

    /// Publishes each delivery to its relay in one round trip; the future holds, per
    /// delivery, how many relays heard it (0: that relay is gone).
    public func publish(_ deliveries: [(relay: String, delivery: RelayDelivery)], on eventLoop: EventLoop) -> EventLoopFuture<[Int]> {
        let command = Array((redis.isCluster ? "SPUBLISH" : "PUBLISH").utf8)
        return publish(
            deliveries.map { [command, Array(Self.deliveryChannel($0.relay).utf8), Array($0.delivery.encoded().readableBytesView)] },
            on: eventLoop)
    }

    /// Tells every relay that `move.user` now has its session on `move.relayId`.
    public func announce(_ move: UserMove, on eventLoop: EventLoop) -> EventLoopFuture<Int> {
        publish([[Array("PUBLISH".utf8), Array(Self.movesChannel.utf8), Array(move.encoded.utf8)]], on: eventLoop).map { $0[0] }
    }

    private func publish(_ commands: [[[UInt8]]], on eventLoop: EventLoop) -> EventLoopFuture<[Int]> {
        redis.pipeline(bytes: commands, on: eventLoop).flatMapThrowing { replies in
            try replies.map { reply in
                if case .error(let message) = reply { throw RedisError(message) }
                return Int(reply.integer ?? 0)
            }
        }
    }

    /// The session token `user`'s registration names, or nil if it has none.
    public func session(of user: String, on eventLoop: EventLoop) -> EventLoopFuture<String?> {
        redis.command(["HGET", Registry.userKey(user), "session"], on: eventLoop).flatMapThrowing { reply in
            if case .error(let message) = reply { throw RedisError(message) }
            return reply.string
        }
    }

    /// Ids and descriptions of the relays whose heartbeat key is alive (`SCAN` on every master).
    public func liveRelays() async throws -> [String: String] {
        var relays: [String: String] = [:]
        let prefix = Registry.relayKey("")
        for key in try await redis.scanKeys(matching: Registry.relayKey("*"), count: 200) {
            let reply = try await redis.command(["GET", key])
            try Registry.check([reply])
            if let value = reply.string { relays[String(key.dropFirst(prefix.count))] = value }
        }
        return relays
    }
}
