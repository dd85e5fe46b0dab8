import NIOCore
import SIMPCore
import SIMPRedis

/// The user directory in Redis: which UDP address and which relay hold each user's session.
///
/// Keys (documented in docs/PROTOCOL.md):
/// - `simp:user:{<userId>}`: hash `addr` (`ip:port`), `relay` (relay id), `session` (token of the
///   control connection), `since` (ms since the epoch when the session registered); expires after the registration TTL
///   unless refreshed.
/// - `simp:seen:{<userId>}`: set at every registration (ms since the epoch), kept for
///   `seenTTLSeconds` after it; a user without a registration but with this key is offline
///   rather than unknown.
/// - `simp:relay:<relayId>`: the relay's listening addresses; expires unless refreshed.
public struct Registry: Sendable {
    public let redis: any RedisCommands
    /// Seconds a registration lives without a refresh.
    public let ttlSeconds: Int
    /// Seconds a user counts as known (offline, not unknown) after its last registration.
    public let seenTTLSeconds: Int

    public init(redis: any RedisCommands, ttlSeconds: Int, seenTTLSeconds: Int = 7 * 24 * 3600) {
        self.redis = redis
        self.ttlSeconds = ttlSeconds
        self.seenTTLSeconds = seenTTLSeconds
    }

    /// The Redis key of `user`'s registration.
    public static func userKey(_ user: String) -> String { userKeyPrefix + KeyTag.user(user) }
    /// What every registration key starts with (then the user's tag).
    public static let userKeyPrefix = "simp:user:"
    /// The Redis key that marks `user` as known.
    public static func seenKey(_ user: String) -> String { "simp:seen:" + KeyTag.user(user) }
    /// The Redis key of a relay's liveness record.
    public static func relayKey(_ relayId: String) -> String { "simp:relay:\(relayId)" }

    // Only the session that wrote a registration may refresh or remove it, so a stale relay
    // never overwrites or deletes the registration of a user who moved on.
    private static let refreshScript = """
        local s = redis.call('HGET', KEYS[1], 'session')
        if s == false or s == ARGV[3] then
          redis.call('HSET', KEYS[1], 'addr', ARGV[1], 'relay', ARGV[2], 'session', ARGV[3])
          redis.call('HSETNX', KEYS[1], 'since', ARGV[4])
          return redis.call('EXPIRE', KEYS[1], ARGV[5])
        end
        return 0
        """
    private static let unregisterScript = """
        if redis.call('HGET', KEYS[1], 'session') == ARGV[1] then return redis.call('DEL', KEYS[1]) end
        return 0
        """

    /// Writes `user`'s registration, replacing any older one (the newest session wins).
    public func register(user: String, route: Route, session: String, on eventLoop: EventLoop) -> EventLoopFuture<Void> {
        let key = Self.userKey(user)
        return redis.pipeline([
            ["MULTI"],
            ["HSET", key, "addr", AddressText.format(route.address) ?? "", "relay", route.relayId,
             "session", session, "since", String(WallClock.millisecondsSinceEpoch())],
            ["EXPIRE", key, String(ttlSeconds)],
            ["SET", Self.seenKey(user), String(WallClock.millisecondsSinceEpoch()), "EX", String(seenTTLSeconds)],
            ["EXEC"],
        ], on: eventLoop).flatMapThrowing { replies in try Self.check(replies) }
    }

    /// Extends the given registrations by the TTL in one round trip, re-creating any that
    /// Redis lost (e.g. after a Redis restart) unless another session has taken the user over.
    public func refresh(_ registrations: [Registration], on eventLoop: EventLoop) -> EventLoopFuture<Void> {
        guard !registrations.isEmpty else { return eventLoop.makeSucceededVoidFuture() }
        let now = String(WallClock.millisecondsSinceEpoch())
        let commands = registrations.map { entry in
            ["EVAL", Self.refreshScript, "1", Self.userKey(entry.user),
             AddressText.format(entry.route.address) ?? "", entry.route.relayId, entry.session, now, String(ttlSeconds)]
        }
        return redis.pipeline(commands, on: eventLoop).flatMapThrowing { replies in try Self.check(replies) }
    }

    /// Removes `user`'s registration if it still belongs to `session`.
    public func unregister(user: String, session: String, on eventLoop: EventLoop) -> EventLoopFuture<Void> {
        redis.command(["EVAL", Self.unregisterScript, "1", Self.userKey(user), session], on: eventLoop)
            .flatMapThrowing { reply in try Self.check([reply]) }
    }

    /// The registered route of `user` (nil if none) and whether the user has registered
    /// before, in one round trip.
    public func lookup(user: String, on eventLoop: EventLoop) -> EventLoopFuture<(route: Route?, known: Bool)> {
        redis.pipeline([["HMGET", Self.userKey(user), "addr", "relay"], ["EXISTS", Self.seenKey(user)]], on: eventLoop)
            .flatMapThrowing { replies in
                try Self.check(replies)
                let known = replies[1].integer == 1
                guard let fields = replies[0].array, fields.count == 2, let addr = fields[0].string,
                      let address = AddressText.parse(addr) else { return (nil, known) }
                return (Route(address: address, relayId: fields[1].string ?? ""), true)
            }
    }

    /// Records that relay `relayId` is alive and where it listens.
    public func announceRelay(_ relayId: String, description: String, on eventLoop: EventLoop) -> EventLoopFuture<Void> {
        redis.command(["SET", Self.relayKey(relayId), description, "EX", String(ttlSeconds)], on: eventLoop)
            .flatMapThrowing { reply in try Self.check([reply]) }
    }

    /// Removes relay `relayId`'s liveness record and every registration in `registrations`.
    public func withdraw(relayId: String, registrations: [Registration], on eventLoop: EventLoop) -> EventLoopFuture<Void> {
        let commands = [["DEL", Self.relayKey(relayId)]] + registrations.map {
            ["EVAL", Self.unregisterScript, "1", Self.userKey($0.user), $0.session]
        }
        return redis.pipeline(commands, on: eventLoop).flatMapThrowing { replies in try Self.check(replies) }
    }

    static func check(_ replies: [RedisValue]) throws {
        for reply in replies {
            if case .error(let message) = reply { throw RedisError(message) }
            if let nested = reply.array { try check(nested) }
        }
    }
}
