import SIMPCore
import SIMPRedis

/// The operator's view of live sessions (`simp-server sessions`), read from the registrations
/// (`simp:user:{<user>}` hashes, docs/PROTOCOL.md §7) and ended through them.
public struct SessionDirectory: Sendable {
    public let redis: any RedisCommands

    public init(redis: any RedisCommands) { self.redis = redis }

    /// One user's live session.
    public struct Entry: Sendable, Equatable {
        public var user: String
        /// The relay that holds the session.
        public var relayId: String
        /// The UDP address the user's datagrams come from, `ip:port`.
        public var address: String
        /// When the session registered (ms since the epoch), if recorded.
        public var since: Int64?
        /// How its datagrams go: `udp`, or `tcp` (in DATAGRAM frames on the control connection,
        /// docs/PROTOCOL.md §5.5); nil if its relay does not record it (an older version).
        public var path: String?
    }

    /// Every registered session, sorted by user.
    public func list() async throws -> [Entry] {
        var entries: [Entry] = []
        for key in try await redis.scanKeys(matching: Registry.userKeyPrefix + "*") {
            guard let user = KeyTag.user(inKey: key, prefix: Registry.userKeyPrefix) else { continue }
            if let entry = try await entry(of: user) { entries.append(entry) }
        }
        return entries.sorted { $0.user < $1.user }
    }

    /// `user`'s session, nil if it has none or its relay no longer vouches for it (the relay is
    /// dead, or alive in another incarnation: docs/PROTOCOL.md §7.1).
    public func entry(of user: String) async throws -> Entry? {
        let reply = try await redis.command(["HMGET", Registry.userKey(user), "relay", "addr", "since", "session", "path"])
        try Registry.check([reply])
        let fields = reply.array?.map(\.string) ?? []
        guard fields.count == 5, let relay = fields[0], let address = fields[1], let token = fields[3],
            token != RelayCore.sessionEndedByOperator
        else { return nil }
        let session = try await redis.pipeline([["HGET", Registry.userKey(user), "s:" + token], ["GET", Registry.relayKey(relay)]])
        try Registry.check(session)
        guard let incarnation = session[0].string?.split(separator: " ").first,
            session[1].string.flatMap(RelayLiveness.incarnation(inRecord:)) == String(incarnation)
        else { return nil }
        return Entry(user: user, relayId: relay, address: address, since: fields[2].flatMap { Int64($0) }, path: fields[4])
    }

    /// Ends `user`'s session: its registration is replaced by one that names no relay and that
    /// no relay refreshes (it expires after `holdSeconds`), and every relay is told the user
    /// moved, so the relay holding the session checks, finds it gone and closes it. Returns
    /// the session ended, nil if the user had none. The user may log in again (lock it first
    /// to keep it out).
    @discardableResult
    public func end(_ user: String, holdSeconds: Int = 60) async throws -> Entry? {
        guard let entry = try await entry(of: user) else { return nil }
        let key = Registry.userKey(user)
        let replies = try await redis.pipeline([
            ["MULTI"], ["DEL", key], ["HSET", key, "session", RelayCore.sessionEndedByOperator], ["EXPIRE", key, String(holdSeconds)], ["EXEC"],
            ["PUBLISH", RelayBus.movesChannel, UserMove(user: user, relayId: "operator").encoded],
        ])
        try Registry.check(replies)
        return entry
    }
}
