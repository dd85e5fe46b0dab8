import NIOCore
import SIMPCore
import SIMPRedis

/// Offline inboxes in Redis: one per known receiving device of a user, so every device gets
/// every stored message once, and one for a user who has no device yet (its first device
/// adopts it).
///
/// Keys (documented in docs/PROTOCOL.md §7.8):
/// - `simp:inbox:{<userId>}:d:<device>`: list of `InboxEntry` texts, oldest first, at most
///   `maxMessages`; `simp:inbox:{<userId>}` the same before the user has a known device.
/// - `simp:inbox-ids:{<userId>}:d:<device>` (and `simp:inbox-ids:{<userId>}`): set of the
///   entries' dedupe keys, so a retransmitted message is stored once.
/// They expire `keyTTLSeconds` after the latest store (a backstop; entries older than the
/// inbox TTL are discarded, with notice, at every store and when the device connects).
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

    /// The Redis key of the inbox list of `user`'s `device` (nil: the inbox of a user without
    /// known devices).
    public static func inboxKey(_ user: String, device: String? = nil) -> String {
        "simp:inbox:" + KeyTag.user(user) + (device.map { ":d:" + $0 } ?? "")
    }
    /// The Redis key of the dedupe keys of that inbox.
    public static func idsKey(_ user: String, device: String? = nil) -> String {
        "simp:inbox-ids:" + KeyTag.user(user) + (device.map { ":d:" + $0 } ?? "")
    }
    /// Seconds the keys live after the latest store.
    public var keyTTLSeconds: Int { ttlSeconds * 2 + 60 }

    // KEYS: devices hash, list and ids of the inbox without device. ARGV: dedupe key, entry, cap,
    // key TTL, cutoff (ms; older entries expire), list key prefix, ids key prefix (+ device).
    // Stores into every known device's inbox (or the one without device). Returns
    // {duplicate everywhere (0/1), discarded...} where each discarded entry is prefixed F (cap)
    // or E (TTL).
    private static let storeScript = RedisScript("""
        local devices = redis.call('HKEYS', KEYS[1])
        local targets = {}
        if #devices == 0 then targets = {{KEYS[2], KEYS[3]}} end
        for _, d in ipairs(devices) do table.insert(targets, {ARGV[6] .. d, ARGV[7] .. d}) end
        local out = {1}
        for _, t in ipairs(targets) do
          if redis.call('SISMEMBER', t[2], ARGV[1]) == 0 then
            out[1] = 0
            while true do
              local head = redis.call('LINDEX', t[1], 0)
              if not head then break end
              local s = tonumber(string.match(head, '^(%d+) '))
              if s ~= nil and s >= tonumber(ARGV[5]) then break end
              redis.call('LPOP', t[1])
              redis.call('SREM', t[2], string.match(head, '^%d+ %S+ (.*)$') or '')
              table.insert(out, 'E' .. head)
            end
            redis.call('RPUSH', t[1], ARGV[2])
            redis.call('SADD', t[2], ARGV[1])
            while redis.call('LLEN', t[1]) > tonumber(ARGV[3]) do
              local head = redis.call('LPOP', t[1])
              redis.call('SREM', t[2], string.match(head, '^%d+ %S+ (.*)$') or '')
              table.insert(out, 'F' .. head)
            end
            redis.call('EXPIRE', t[1], ARGV[4])
            redis.call('EXPIRE', t[2], ARGV[4])
          end
        end
        return out
        """)
    private static let removeScript = RedisScript("""
        redis.call('SREM', KEYS[2], ARGV[2])
        return redis.call('LREM', KEYS[1], 1, ARGV[1])
        """)
    // KEYS: list and ids without device, list and ids of the device. The entries go in front
    // of the device's (they are older).
    private static let adoptScript = RedisScript("""
        local items = redis.call('LRANGE', KEYS[1], 0, -1)
        for i = #items, 1, -1 do redis.call('LPUSH', KEYS[3], items[i]) end
        if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('SUNIONSTORE', KEYS[4], KEYS[4], KEYS[2]) end
        redis.call('DEL', KEYS[1], KEYS[2])
        return #items
        """)

    /// `user`'s first device `device` takes what was stored before the user had one.
    public func adopt(user: String, device: String, on eventLoop: EventLoop) -> EventLoopFuture<Void> {
        Self.adoptScript.run(.init(keys: [Self.inboxKey(user), Self.idsKey(user), Self.inboxKey(user, device: device),
                                          Self.idsKey(user, device: device)]), on: redis, eventLoop: eventLoop)
            .flatMapThrowing { reply in try Registry.check([reply]) }
    }

    /// Deletes the inboxes of `user`'s forgotten `devices`.
    public func forget(user: String, devices: [String], on eventLoop: EventLoop) -> EventLoopFuture<Void> {
        guard !devices.isEmpty else { return eventLoop.makeSucceededVoidFuture() }
        let keys = devices.flatMap { [Self.inboxKey(user, device: $0), Self.idsKey(user, device: $0)] }
        return redis.command(["DEL"] + keys, on: eventLoop).flatMapThrowing { reply in try Registry.check([reply]) }
    }

    /// Appends `entry` to the inbox of each of `user`'s known devices (or to the one without a
    /// device) unless an entry with its dedupe key is there, applying the cap and the TTL in
    /// the same atomic step.
    public func store(_ entry: InboxEntry, for user: String, wallNow: Int64, on eventLoop: EventLoop) -> EventLoopFuture<InboxStoreResult> {
        let cutoff = wallNow - Int64(ttlSeconds) * 1000
        return Self.storeScript.run(
            .init(keys: [Registry.devicesKey(user), Self.inboxKey(user), Self.idsKey(user)],
                  arguments: [entry.dedupeKey, entry.text, String(maxMessages), String(keyTTLSeconds), String(cutoff),
                              Self.inboxKey(user, device: ""), Self.idsKey(user, device: "")]),
            on: redis, eventLoop: eventLoop
        ).flatMapThrowing { reply in
            if case .error(let message) = reply { throw RedisError(message) }
            guard let items = reply.array, let duplicate = items.first?.integer else { throw RedisError("unexpected inbox reply \(reply)") }
            var seen: Set<String> = []
            let discarded = items.dropFirst().compactMap { item -> DiscardedEntry? in
                guard let text = item.string, let tag = text.first, let entry = InboxEntry(text: String(text.dropFirst())),
                      seen.insert(entry.dedupeKey).inserted else { return nil } // reported once, whatever the devices
                return DiscardedEntry(entry: entry, reason: tag == "F" ? .full : .expired)
            }
            return InboxStoreResult(duplicate: duplicate == 1, discarded: discarded)
        }
    }

    /// The inbox of `user`'s `device` (nil: of the user without devices), oldest first (entries that do not parse are skipped).
    public func load(user: String, device: String?, on eventLoop: EventLoop) -> EventLoopFuture<[InboxEntry]> {
        redis.command(["LRANGE", Self.inboxKey(user, device: device), "0", "-1"], on: eventLoop).flatMapThrowing { reply in
            if case .error(let message) = reply { throw RedisError(message) }
            return (reply.array ?? []).compactMap { $0.string.flatMap(InboxEntry.init(text:)) }
        }
    }

    /// Removes exactly `entry` from the inbox of `user`'s `device`.
    public func remove(_ entry: InboxEntry, for user: String, device: String?, on eventLoop: EventLoop) -> EventLoopFuture<Void> {
        Self.removeScript.run(.init(keys: [Self.inboxKey(user, device: device), Self.idsKey(user, device: device)],
                                    arguments: [entry.text, entry.dedupeKey]), on: redis, eventLoop: eventLoop)
            .flatMapThrowing { reply in
                if case .error(let message) = reply { throw RedisError(message) }
            }
    }
}
