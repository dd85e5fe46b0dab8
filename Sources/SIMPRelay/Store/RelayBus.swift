import NIOCore
import SIMPCore
import SIMPRedis

/// The Redis side of many relays on one Redis (docs/PROTOCOL.md §7.7): each relay's delivery
/// channel, the moves channel, and the registry of live relays.
///
/// - `simp:relay:<relayId>:deliver` (channel): `RelayDelivery` envelopes for users on that relay.
/// - `simp:relays:moves` (channel): `UserMove` announcements, `<relayId> <userId>`.
/// - `simp:relay:<relayId>` (key, written by `Registry.announceRelay`): the relay's addresses;
///   its TTL is the relay's heartbeat.
public struct RelayBus: Sendable {
    public let redis: RedisClient

    public init(redis: RedisClient) { self.redis = redis }

    /// The channel relay `relayId` receives deliveries on.
    public static func deliveryChannel(_ relayId: String) -> String { "simp:relay:\(relayId):deliver" }
    /// The channel every relay receives moves on.
    public static let movesChannel = "simp:relays:moves"

    /// Publishes each delivery to its relay in one round trip; the future holds, per
    /// delivery, how many relays heard it (0: that relay is gone).
    public func publish(_ deliveries: [(relay: String, delivery: RelayDelivery)], on eventLoop: EventLoop) -> EventLoopFuture<[Int]> {
        publish(deliveries.map { (Array(Self.deliveryChannel($0.relay).utf8), Array($0.delivery.encoded().readableBytesView)) }, on: eventLoop)
    }

    /// Tells every relay that `move.user` now has its session on `move.relayId`.
    public func announce(_ move: UserMove, on eventLoop: EventLoop) -> EventLoopFuture<Int> {
        publish([(Array(Self.movesChannel.utf8), Array(move.encoded.utf8))], on: eventLoop).map { $0[0] }
    }

    private func publish(_ messages: [(channel: [UInt8], payload: [UInt8])], on eventLoop: EventLoop) -> EventLoopFuture<[Int]> {
        let publish = Array("PUBLISH".utf8)
        return redis.pipeline(bytes: messages.map { [publish, $0.channel, $0.payload] }, on: eventLoop).flatMapThrowing { replies in
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

    /// Ids and descriptions of the relays whose heartbeat key is alive.
    public func liveRelays() async throws -> [String: String] {
        var relays: [String: String] = [:]
        var cursor = "0"
        repeat {
            let reply = try await redis.command(["SCAN", cursor, "MATCH", Registry.relayKey("*"), "COUNT", "200"])
            guard let parts = reply.array, parts.count == 2, let next = parts[0].string else { throw RedisError("unexpected SCAN reply \(reply)") }
            cursor = next
            for key in parts[1].array ?? [] {
                guard let key = key.string, let value = try await redis.command(["GET", key]).string else { continue }
                relays[String(key.dropFirst(Registry.relayKey("").count))] = value
            }
        } while cursor != "0"
        return relays
    }
}
