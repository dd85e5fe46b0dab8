import NIOCore
import SIMPCore
import SIMPRedis

/// Presence in Redis.
///
/// Keys (documented in docs/PROTOCOL.md §7):
/// - `simp:presence:{<user>}`: hash `state` (`online`/`offline`) and `lastSeen` (ms since the
///   epoch), written when the user connects and disconnects, never refreshed; it lives
///   `ttlSeconds` after its latest write. `online` counts only while a relay vouches for a
///   receiving session of the user (`Registry.online`), so a crashed relay's users turn offline
///   together when its liveness record expires.
/// - `simp:presence:{<user>}:rooms`: set of the rooms the user is in, so its presence changes
///   reach their members (maintained by `RoomStore` on join and leave).
/// - `simp:presence:{<user>}:off`: `1` while the user's latest receiving login turned presence
///   off (written with each record, deleted when a login turns it on; no expiry).
public struct PresenceStore: Sendable {
    public let redis: any RedisCommands
    public let ttlSeconds: Int

    public init(redis: any RedisCommands, ttlSeconds: Int = 7 * 24 * 3600) {
        self.redis = redis
        self.ttlSeconds = ttlSeconds
    }

    public static func presenceKey(_ user: String) -> String { "simp:presence:" + KeyTag.user(user) }
    public static func roomsKey(_ user: String) -> String { presenceKey(user) + ":rooms" }
    public static func offKey(_ user: String) -> String { presenceKey(user) + ":off" }

    // KEYS: presence, rooms, off (one user's slot). ARGV: state, now, TTL, hidden (1/0).
    // Returns the user's rooms, whose member sets (other slots on a cluster) are read after it.
    private static let recordScript = RedisScript(
        """
        redis.call('HSET', KEYS[1], 'state', ARGV[1], 'lastSeen', ARGV[2])
        redis.call('EXPIRE', KEYS[1], ARGV[3])
        if ARGV[4] == '1' then redis.call('SET', KEYS[3], '1') else redis.call('DEL', KEYS[3]) end
        return redis.call('SMEMBERS', KEYS[2])
        """)

    /// Records `user` as online or offline now, with presence off (`hidden`) or on; returns the
    /// members of the user's rooms (read in a second round trip, one command per room, when the
    /// user is in any).
    public func record(user: String, online: Bool, hidden: Bool = false, now: Int64, on eventLoop: EventLoop) -> EventLoopFuture<[String]> {
        Self.recordScript.run(
            .init(
                keys: [Self.presenceKey(user), Self.roomsKey(user), Self.offKey(user)],
                arguments: [online ? "online" : "offline", String(now), String(ttlSeconds), hidden ? "1" : "0"]),
            on: redis, eventLoop: eventLoop
        ).flatMap { [redis] reply in
            if case .error(let message) = reply { return eventLoop.makeFailedFuture(RedisError(message)) }
            let rooms = (reply.array ?? []).compactMap(\.string)
            guard !rooms.isEmpty else { return eventLoop.makeSucceededFuture([]) }
            return redis.pipeline(rooms.map { ["SMEMBERS", RoomStore.membersKey($0)] }, on: eventLoop).flatMapThrowing { replies in
                try Registry.check(replies)
                return Array(Set(replies.flatMap { ($0.array ?? []).compactMap(\.string) }))
            }
        }
    }

    /// The presence of `users` as recorded (absent: offline, last seen when they last
    /// registered, or never); whether a relay still vouches for an online one is checked by the
    /// caller.
    /// A user with no credentials (`simp:cred:{<user>}`) who was never seen does not exist:
    /// `lastSeen` is -1. `hidden`: the user turned presence off.
    public func lookup(_ users: [String], on eventLoop: EventLoop) -> EventLoopFuture<[PresenceEntry]> {
        guard !users.isEmpty else { return eventLoop.makeSucceededFuture([]) }
        let commands = users.flatMap {
            [
                ["HMGET", Self.presenceKey($0), "state", "lastSeen"], ["GET", Registry.seenKey($0)], ["EXISTS", CredentialStore.key($0)],
                ["EXISTS", Self.offKey($0)],
            ]
        }
        return redis.pipeline(commands, on: eventLoop).map { replies in
            users.enumerated().map { index, user in
                let fields = replies[4 * index].array ?? []
                let state = fields.first?.string
                let lastSeen = fields.count > 1 ? fields[1].string.flatMap { Int64($0) } : nil
                let seen = replies[4 * index + 1].string.flatMap { Int64($0) }
                let exists = replies[4 * index + 2].integer == 1 || lastSeen != nil || seen != nil
                return PresenceEntry(
                    user: user, online: state == "online", lastSeen: exists ? lastSeen ?? seen ?? 0 : -1, hidden: replies[4 * index + 3].integer == 1)
            }
        }
    }
}
