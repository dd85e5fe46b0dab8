import NIOCore
import SIMPCore
import SIMPRedis

/// Offline inboxes in Redis.
///
/// Keys (documented in docs/PROTOCOL.md §7):
/// - `simp:inbox:{<userId>}`: list of `InboxEntry` texts, oldest first, at most `maxMessages`.
/// - `simp:inbox:{<userId>}:ids`: set of the entries' dedupe keys, so a retransmitted message is
///   stored once.
/// Both expire `keyTTLSeconds` after the latest store (a backstop; entries older than the
/// inbox TTL are discarded, with notice, at every store and when the user connects).
public struct InboxStore: Sendable {
    public let redis: any RedisCommands
    /// Entries kept per inbox; the oldest are discarded beyond it.
    public let maxMessages: Int
    /// Seconds an entry may wait.
    public let ttlSeconds: Int

    public init(redis: any RedisCommands, maxMessages: Int, ttlSeconds: Int) {
        self.redis = redis
        self.maxMessages = max(1, maxMessages)
        self.ttlSeconds = max(1, ttlSeconds)
    }

    /// The Redis key of `user`'s inbox list.
    public static func inboxKey(_ user: String) -> String { "simp:inbox:" + KeyTag.user(user) }
    /// The Redis key of the dedupe keys of `user`'s inbox.
    public static func idsKey(_ user: String) -> String { inboxKey(user) + ":ids" }
    /// Seconds the keys live after the latest store.
    public var keyTTLSeconds: Int { ttlSeconds * 2 + 60 }

    // KEYS: list, ids. ARGV: dedupe key, entry, cap, key TTL, cutoff (ms; older entries expire).
    // Returns {duplicate (0/1), discarded...} where each discarded entry is prefixed F (cap) or E (TTL).
    private static let storeScript = """
        if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return {1} end
        local out = {0}
        while true do
          local head = redis.call('LINDEX', KEYS[1], 0)
          if not head then break end
          local t = tonumber(string.match(head, '^(%d+) '))
          if t ~= nil and t >= tonumber(ARGV[5]) then break end
          redis.call('LPOP', KEYS[1])
          redis.call('SREM', KEYS[2], string.match(head, '^%d+ %S+ (.*)$') or '')
          table.insert(out, 'E' .. head)
        end
        redis.call('RPUSH', KEYS[1], ARGV[2])
        redis.call('SADD', KEYS[2], ARGV[1])
        while redis.call('LLEN', KEYS[1]) > tonumber(ARGV[3]) do
          local head = redis.call('LPOP', KEYS[1])
          redis.call('SREM', KEYS[2], string.match(head, '^%d+ %S+ (.*)$') or '')
          table.insert(out, 'F' .. head)
        end
        redis.call('EXPIRE', KEYS[1], ARGV[4])
        redis.call('EXPIRE', KEYS[2], ARGV[4])
        return out
        """
    private static let removeScript = """
        redis.call('SREM', KEYS[2], ARGV[2])
        return redis.call('LREM', KEYS[1], 1, ARGV[1])
        """

    /// Appends `entry` to `user`'s inbox unless an entry with its dedupe key is there, applying
    /// the cap and the TTL in the same atomic step.
    public func store(_ entry: InboxEntry, for user: String, wallNow: Int64, on eventLoop: EventLoop) -> EventLoopFuture<InboxStoreResult> {
        let cutoff = wallNow - Int64(ttlSeconds) * 1000
        return redis.command(
            ["EVAL", Self.storeScript, "2", Self.inboxKey(user), Self.idsKey(user), entry.dedupeKey, entry.text,
             String(maxMessages), String(keyTTLSeconds), String(cutoff)], on: eventLoop
        ).flatMapThrowing { reply in
            if case .error(let message) = reply { throw RedisError(message) }
            guard let items = reply.array, let duplicate = items.first?.integer else { throw RedisError("unexpected inbox reply \(reply)") }
            let discarded = items.dropFirst().compactMap { item -> DiscardedEntry? in
                guard let text = item.string, let tag = text.first, let entry = InboxEntry(text: String(text.dropFirst())) else { return nil }
                return DiscardedEntry(entry: entry, reason: tag == "F" ? .full : .expired)
            }
            return InboxStoreResult(duplicate: duplicate == 1, discarded: discarded)
        }
    }

    /// `user`'s inbox, oldest first (entries that do not parse are skipped).
    public func load(user: String, on eventLoop: EventLoop) -> EventLoopFuture<[InboxEntry]> {
        redis.command(["LRANGE", Self.inboxKey(user), "0", "-1"], on: eventLoop).flatMapThrowing { reply in
            if case .error(let message) = reply { throw RedisError(message) }
            return (reply.array ?? []).compactMap { $0.string.flatMap(InboxEntry.init(text:)) }
        }
    }

    /// Removes exactly `entry` from `user`'s inbox.
    public func remove(_ entry: InboxEntry, for user: String, on eventLoop: EventLoop) -> EventLoopFuture<Void> {
        redis.command(["EVAL", Self.removeScript, "2", Self.inboxKey(user), Self.idsKey(user), entry.text, entry.dedupeKey], on: eventLoop)
            .flatMapThrowing { reply in
                if case .error(let message) = reply { throw RedisError(message) }
            }
    }
}
