import NIOCore
import SIMPCore
import SIMPRedis

/// Stored messages in Redis: one durable log per user, and a cursor per known receiving device,
/// so every device gets every stored message once and one device never takes them from another.
///
/// Keys (documented in docs/PROTOCOL.md §7.8), all tagged `{<userId>}` (one cluster slot):
/// - `simp:log:{<userId>}`: a stream of entries, oldest first, each with the fields `e` (the
///   `InboxEntry` text) and `k` (its dedupe key); at most `maxMessages` entries.
/// - `simp:log-ids:{<userId>}`: hash dedupe key → stream id, so a retransmitted message is
///   stored once.
/// - `simp:cursors:{<userId>}`: hash `c:<device>` → the last stream id the device has receipted
///   contiguously, `s:<device>` → where a device that became known after others started.
/// - `simp:log-acked:{<userId>}:d:<device>`: set of the stream ids the device receipted beyond
///   its cursor (out of order).
/// Entries every known device has leave the log; a full log refuses new entries (their senders
/// told to try again later); entries older than the TTL are discarded (their senders told,
/// unless a device received them). The keys expire
/// `keyTTLSeconds` after the latest store (a backstop), and go as soon as the log is empty.
public struct InboxStore: Sendable {
    public let redis: any RedisCommands
    /// Entries kept per user; a full log refuses new ones.
    public let maxMessages: Int
    /// Seconds an entry may wait.
    public let ttlSeconds: Int

    public init(redis: any RedisCommands, maxMessages: Int, ttlSeconds: Int) {
        self.redis = redis
        self.maxMessages = max(1, maxMessages)
        self.ttlSeconds = max(1, ttlSeconds)
    }

    /// The Redis key of `user`'s log (a stream).
    public static func logKey(_ user: String) -> String { "simp:log:" + KeyTag.user(user) }
    /// The Redis key of the dedupe keys of `user`'s log entries.
    public static func idsKey(_ user: String) -> String { "simp:log-ids:" + KeyTag.user(user) }
    /// The Redis key of `user`'s devices' cursors.
    public static func cursorsKey(_ user: String) -> String { "simp:cursors:" + KeyTag.user(user) }
    /// The Redis key of the entries `user`'s `device` receipted beyond its cursor.
    public static func ackedKey(_ user: String, device: String) -> String { ackedPrefix(user) + device }
    /// The start of every `ackedKey` of `user` (the scripts add the device).
    static func ackedPrefix(_ user: String) -> String { "simp:log-acked:" + KeyTag.user(user) + ":d:" }
    /// What every log key starts with (then the user's tag).
    public static let logKeyPrefix = "simp:log:"
    /// Seconds the keys live after the latest store.
    public var keyTTLSeconds: Int { ttlSeconds * 2 + 60 }

    /// The call of a log script for `user`: the four keys every one takes, then `arguments`.
    private static func call(_ user: String, _ arguments: [String]) -> RedisScript.Call {
        .init(keys: [logKey(user), idsKey(user), cursorsKey(user), Registry.devicesKey(user)], arguments: [ackedPrefix(user)] + arguments)
    }

    /// Appends `entry` to `user`'s log unless an entry with its dedupe key is there or the log
    /// is full (`maxMessages` entries some device lacks: refused), after applying the TTL, in
    /// one atomic step.
    public func store(_ entry: InboxEntry, for user: String, wallNow: Int64, on eventLoop: EventLoop) -> EventLoopFuture<InboxStoreResult> {
        let cutoff = wallNow - Int64(ttlSeconds) * 1000
        return UserLogScripts.store.run(
            Self.call(user, [entry.dedupeKey, entry.text, String(maxMessages), String(keyTTLSeconds), String(cutoff)]),
            on: redis, eventLoop: eventLoop
        ).flatMapThrowing { reply in
            if case .error(let message) = reply { throw RedisError(message) }
            guard let items = reply.array, let outcome = items.first?.integer else { throw RedisError("unexpected log reply \(reply)") }
            let discarded = items.dropFirst().compactMap { item -> DiscardedEntry? in
                guard let text = item.string, let entry = InboxEntry(text: String(text.dropFirst())) else { return nil }
                return DiscardedEntry(entry: entry, reason: .expired)
            }
            return InboxStoreResult(duplicate: outcome == 1, refused: outcome == 2, discarded: discarded)
        }
    }

    /// What `user`'s `device` has not receipted, oldest first, after the entries that expired
    /// now without reaching any device (older than the TTL: the relay reports them); and,
    /// `earlier`, the entries in the log that were stored before the device became known.
    /// Entries that do not parse are skipped.
    public func load(user: String, device: String, wallNow: Int64, on eventLoop: EventLoop)
        -> EventLoopFuture<(entries: [InboxEntry], earlier: [InboxEntry])>
    {
        let cutoff = wallNow - Int64(ttlSeconds) * 1000
        return UserLogScripts.load.run(Self.call(user, [device, String(cutoff)]), on: redis, eventLoop: eventLoop).flatMapThrowing { reply in
            if case .error(let message) = reply { throw RedisError(message) }
            var entries: [InboxEntry] = [], earlier: [InboxEntry] = []
            for text in (reply.array ?? []).compactMap(\.string) {
                if text.hasPrefix("^") {
                    InboxEntry(text: String(text.dropFirst())).map { earlier.append($0) }
                } else {
                    InboxEntry(text: text).map { entries.append($0) }
                }
            }
            return (entries, earlier)
        }
    }

    /// `user`'s `device` has `entry` (it receipted it, or a stored receipt was handed to it):
    /// its cursor moves on, and what every device has leaves the log.
    public func remove(_ entry: InboxEntry, for user: String, device: String, on eventLoop: EventLoop) -> EventLoopFuture<Void> {
        UserLogScripts.ack.run(Self.call(user, [device, entry.dedupeKey]), on: redis, eventLoop: eventLoop).flatMapThrowing { reply in
            if case .error(let message) = reply { throw RedisError(message) }
        }
    }

    /// Drops the cursors of `user`'s forgotten `devices`; what the remaining devices all have
    /// leaves the log.
    public func forget(user: String, devices: [String], on eventLoop: EventLoop) -> EventLoopFuture<Void> {
        guard !devices.isEmpty else { return eventLoop.makeSucceededVoidFuture() }
        return UserLogScripts.forget.run(Self.call(user, devices), on: redis, eventLoop: eventLoop).flatMapThrowing { reply in
            try Registry.check([reply])
        }
    }

    /// What `user`'s `device` has not receipted, oldest first, read without changing anything
    /// (for operators' tools and tests; the relay uses `load`).
    public func pending(user: String, device: String, on eventLoop: EventLoop) -> EventLoopFuture<[InboxEntry]> {
        redis.pipeline([["HGET", Self.cursorsKey(user), "c:" + device], ["SMEMBERS", Self.ackedKey(user, device: device)]], on: eventLoop)
            .flatMap { [redis] replies in
                let cursor = replies[0].string ?? "0-0"
                let acked = Set(replies[1].array?.compactMap(\.string) ?? [])
                return redis.command(["XRANGE", Self.logKey(user), "(" + cursor, "+"], on: eventLoop).flatMapThrowing { reply in
                    try Registry.check(replies + [reply])
                    return (reply.array ?? []).compactMap { item -> InboxEntry? in
                        guard let pair = item.array, pair.count == 2, let id = pair[0].string, !acked.contains(id),
                            let fields = pair[1].array, fields.count >= 2
                        else { return nil }
                        return fields[1].string.flatMap(InboxEntry.init(text:))
                    }
                }
            }
    }
}
