import NIOCore
import SIMPCore
import SIMPRedis

/// Who shares a conversation with whom, in Redis: what decides who may see a user's presence and
/// hear of its new devices (docs/PROTOCOL.md §4.8, "What the relay still learns").
///
/// Keys (documented in docs/PROTOCOL.md §7):
/// - `simp:contacts:{<user>}`: sorted set of the users `user` sent content to (direct messages,
///   not room posts), scored by when the relay last noted it (ms since the epoch); at most
///   `maxContacts` (the oldest noted are dropped); lives `ttlSeconds` after its latest write.
///
/// `user` shares a conversation with `peer` when `peer` is in `user`'s set (for presence: `user`
/// wrote to `peer`), or either is in the other's (for new-device notices: one of them wrote to
/// the other), or both are members of one room (`PresenceStore.roomsKey`).
public struct ContactStore: Sendable {
    public let redis: any RedisCommands
    public let maxContacts: Int
    public let ttlSeconds: Int

    /// Peers kept per user (the newest noted).
    public static let defaultMaxContacts = 1000

    public init(redis: any RedisCommands, maxContacts: Int = defaultMaxContacts, ttlSeconds: Int = 90 * 24 * 3600) {
        self.redis = redis
        self.maxContacts = maxContacts
        self.ttlSeconds = ttlSeconds
    }

    public static func key(_ user: String) -> String { "simp:contacts:" + KeyTag.user(user) }

    /// Notes that `user` sent content to `peer` at `now` (one user's slot).
    public func note(user: String, peer: String, now: Int64, on eventLoop: EventLoop) -> EventLoopFuture<Void> {
        let key = Self.key(user)
        let commands = [
            ["ZADD", key, String(now), peer], ["ZREMRANGEBYRANK", key, "0", String(-(maxContacts + 1))], ["EXPIRE", key, String(ttlSeconds)],
        ]
        return redis.pipeline(commands, on: eventLoop).flatMapThrowing { try Registry.check($0) }
    }

    /// For each pair, whether `user` shares a conversation with `peer`: `peer` is among the
    /// users `user` sent content to (or, `eitherWay`, `user` among those `peer` sent content
    /// to), or they are members of one room.
    public func share(_ pairs: [(user: String, peer: String)], eitherWay: Bool = false, on eventLoop: EventLoop) -> EventLoopFuture<[Bool]> {
        guard !pairs.isEmpty else { return eventLoop.makeSucceededFuture([]) }
        var people: [String] = []
        for pair in pairs {
            for person in [pair.user, pair.peer] where !people.contains(person) { people.append(person) }
        }
        let wrote = pairs.map { ["ZSCORE", Self.key($0.user), $0.peer] }
        let wasWritten = eitherWay ? pairs.map { ["ZSCORE", Self.key($0.peer), $0.user] } : []
        let commands = wrote + wasWritten + people.map { ["SMEMBERS", PresenceStore.roomsKey($0)] }
        return redis.pipeline(commands, on: eventLoop).flatMapThrowing { [people] replies in
            try Registry.check(replies)
            let roomsAt = wrote.count + wasWritten.count
            var rooms: [String: Set<String>] = [:]
            for (index, person) in people.enumerated() {
                rooms[person] = Set((replies[roomsAt + index].array ?? []).compactMap(\.string))
            }
            return pairs.enumerated().map { index, pair in
                replies[index].string != nil || (eitherWay && replies[wrote.count + index].string != nil)
                    || !(rooms[pair.user] ?? []).isDisjoint(with: rooms[pair.peer] ?? [])
            }
        }
    }
}
