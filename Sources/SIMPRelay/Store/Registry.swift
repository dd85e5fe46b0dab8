import NIOCore
import SIMPCore
import SIMPRedis

/// The user directory in Redis: the live sessions of each user (one receiving session per
/// device, and send-only ones), which UDP address and relay hold each, and the user's known
/// receiving devices.
///
/// Keys (documented in docs/PROTOCOL.md §7.1):
/// - `simp:user:{<userId>}`: hash with a field per session, `s:<token>` →
///   `<incarnation> <r|s> <since ms> <relayId> <addr> <device>` (`r` receiving, `s` send-only),
///   a field per receiving device, `d:<device>` → the token of its session, and the user's
///   newest receiving session mirrored in `addr`, `relay`, `session`, `since`, `path` (for
///   operators' tools). Written at connect, move (address or datagram path) and disconnect only: a session counts while its relay's
///   liveness record (`RelayLiveness`) names the same incarnation; readers ignore the others
///   and remove them lazily. The key expires `entryTTLSeconds` after its latest write (a
///   backstop; relays re-write their sessions more often than that).
/// - `simp:devices:{<userId>}`: hash of the user's known receiving devices, device → ms since
///   the epoch of its latest registration; a device not registered for `deviceTTLSeconds` and
///   without a live session is forgotten.
/// - `simp:seen:{<userId>}`: set at every registration (ms since the epoch), kept for
///   `seenTTLSeconds` after it; a user without a registration but with this key is offline
///   rather than unknown.
/// - `simp:relay:<relayId>`: the relay's liveness record (`RelayLiveness`).
public struct Registry: Sendable {
    public let redis: any RedisCommands
    /// This relay's liveness record, whose incarnation its registrations carry.
    public let liveness: RelayLiveness
    /// Seconds a user's registrations key lives after its latest write.
    public let entryTTLSeconds: Int
    /// Seconds a user counts as known (offline, not unknown) after its last registration.
    public let seenTTLSeconds: Int
    /// Seconds a receiving device stays known after its latest registration.
    public let deviceTTLSeconds: Int
    /// Receiving devices a user may have (`RelayLimits.maxDevicesPerUser`): one more is not registered.
    public let maxDevices: Int

    public init(
        redis: any RedisCommands, liveness: RelayLiveness, entryTTLSeconds: Int = 24 * 3600, seenTTLSeconds: Int = 7 * 24 * 3600,
        deviceTTLSeconds: Int = 7 * 24 * 3600, maxDevices: Int = RelayLimits().maxDevicesPerUser
    ) {
        self.redis = redis
        self.liveness = liveness
        self.entryTTLSeconds = entryTTLSeconds
        self.seenTTLSeconds = seenTTLSeconds
        self.deviceTTLSeconds = deviceTTLSeconds
        self.maxDevices = max(1, maxDevices)
    }

    /// The Redis key of `user`'s registrations.
    public static func userKey(_ user: String) -> String { userKeyPrefix + KeyTag.user(user) }
    /// What every registration key starts with (then the user's tag).
    public static let userKeyPrefix = "simp:user:"
    /// The Redis key of `user`'s known receiving devices.
    public static func devicesKey(_ user: String) -> String { "simp:devices:" + KeyTag.user(user) }
    /// The Redis key that marks `user` as known.
    public static func seenKey(_ user: String) -> String { "simp:seen:" + KeyTag.user(user) }
    /// The Redis key of a relay's liveness record.
    public static func relayKey(_ relayId: String) -> String { "simp:relay:\(relayId)" }
    /// The mirror's `path` field: `udp`, or `tcp` for datagrams in DATAGRAM frames on the
    /// control connection (docs/PROTOCOL.md §5.5).
    static func pathText(of registration: Registration) -> String { registration.overControl ? "tcp" : "udp" }

    /// A session's field value: `<incarnation> <r|s> <since> <relay> <addr> <device>`.
    static func value(of registration: Registration, incarnation: String, since: Int64) -> String {
        "\(incarnation) \(registration.receives ? "r" : "s") \(since) \(registration.route.relayId) "
            + "\(AddressText.format(registration.route.address) ?? "-") \(registration.device)"
    }

    // KEYS: user hash, devices hash, the user's log and cursors (InboxStore). ARGV: token, value,
    // device, receives (1/0), ttl ms, now ms, forget devices registered before (ms), this relay,
    // addr, since, acked sets' prefix, this relay's incarnation, datagram path, devices a user may have.
    // A device that becomes known gets a cursor: the user's first device none (it gets the whole
    // log), a later one the log's last entry (it gets what is stored from now on).
    // Returns {known devices, {the other sessions: "<relay> <incarnation> <token> <device>"...},
    // forgotten devices...}; the relay checks which of the others their relays vouch for. A
    // receiving device that would be one more than the user may have writes nothing: {-1, {}, forgotten...}.
    private static let registerScript = RedisScript(
        """
        local token, device, receiving = ARGV[1], ARGV[3], ARGV[4] == '1'
        local forgotten = {}
        local first = 0
        if receiving then
          local all = redis.call('HGETALL', KEYS[2])
          for i = 1, #all, 2 do
            if all[i] ~= device and tonumber(all[i + 1]) < tonumber(ARGV[7]) and redis.call('HEXISTS', KEYS[1], 'd:' .. all[i]) == 0 then
              redis.call('HDEL', KEYS[2], all[i])
              table.insert(forgotten, all[i])
            end
          end
          if redis.call('HEXISTS', KEYS[2], device) == 0 and redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[14]) then
            local out = {-1, {}}
            for _, d in ipairs(forgotten) do table.insert(out, d) end
            return out
          end
          local old = redis.call('HGET', KEYS[1], 'd:' .. device)
          if old and old ~= token then redis.call('HDEL', KEYS[1], 's:' .. old) end
          redis.call('HSET', KEYS[1], 'd:' .. device, token, 'addr', ARGV[9], 'relay', ARGV[8], 'session', token, 'since', ARGV[10], 'path', ARGV[13])
          if redis.call('HLEN', KEYS[2]) == 0 then first = 1 end
          if redis.call('HEXISTS', KEYS[2], device) == 0 then
            redis.call('HDEL', KEYS[4], 'c:' .. device, 's:' .. device)
            redis.call('DEL', ARGV[11] .. device)
            local last = first == 0 and redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)[1]
            if last then
              redis.call('HSET', KEYS[4], 'c:' .. device, last[1], 's:' .. device, last[1])
              local ttl = redis.call('PTTL', KEYS[3])
              if ttl > 0 then redis.call('PEXPIRE', KEYS[4], ttl) end
            end
          end
          redis.call('HSET', KEYS[2], device, ARGV[6])
        elseif redis.call('HGET', KEYS[1], 'session') == '\(RelayCore.sessionEndedByOperator)' then
          redis.call('HDEL', KEYS[1], 'session')
        end
        redis.call('HSET', KEYS[1], 's:' .. token, ARGV[2])
        redis.call('PEXPIRE', KEYS[1], ARGV[5])
        local others = {}
        local fields = redis.call('HGETALL', KEYS[1])
        for i = 1, #fields, 2 do
          if string.sub(fields[i], 1, 2) == 's:' then
            local incarnation, relay, device = string.match(fields[i + 1], '^(%S+) %a %d+ (%S+) %S+ ?(.*)$')
            if relay and (relay ~= ARGV[8] or incarnation ~= ARGV[12]) then
              table.insert(others, relay .. ' ' .. incarnation .. ' ' .. string.sub(fields[i], 3) .. ' ' .. device)
            end
          end
        end
        local out = {redis.call('HLEN', KEYS[2]), others}
        for _, d in ipairs(forgotten) do table.insert(out, d) end
        return out
        """)

    // KEYS: user hash. ARGV: token, value, device, receives, ttl ms, now ms, addr, relay, datagram path.
    // Only the session that wrote a registration may re-write it (a move, a new incarnation, the
    // periodic sweep): it is re-created if Redis lost it, unless the device has a newer session
    // or an operator ended the user's sessions. Its `since` is kept.
    private static let refreshScript = RedisScript(
        """
        local token, device = ARGV[1], ARGV[3]
        local top = redis.call('HGET', KEYS[1], 'session')
        if top == '\(RelayCore.sessionEndedByOperator)' then return 0 end
        if ARGV[4] == '1' then
          local owner = redis.call('HGET', KEYS[1], 'd:' .. device)
          if owner and owner ~= token then return 0 end
          redis.call('HSET', KEYS[1], 'd:' .. device, token)
          if top == false or top == token then
            redis.call('HSET', KEYS[1], 'addr', ARGV[7], 'relay', ARGV[8], 'session', token, 'path', ARGV[9])
            redis.call('HSETNX', KEYS[1], 'since', ARGV[6])
          end
        end
        local old = redis.call('HGET', KEYS[1], 's:' .. token)
        local value = ARGV[2]
        if old then
          local since = string.match(old, '^%S+ %a (%d+) ')
          if since then value = string.gsub(value, '^(%S+ %a )%d+ ', '%1' .. since .. ' ') end
        end
        redis.call('HSET', KEYS[1], 's:' .. token, value)
        return redis.call('PEXPIRE', KEYS[1], ARGV[5])
        """)
    // KEYS: user hash. ARGV: token, device, and for a reader's clean-up of a session its relay
    // no longer vouches for, the incarnation it must still carry.
    private static let unregisterScript = RedisScript(
        """
        if ARGV[3] then
          local value = redis.call('HGET', KEYS[1], 's:' .. ARGV[1])
          if not value or string.sub(value, 1, #ARGV[3] + 1) ~= ARGV[3] .. ' ' then return 0 end
        end
        redis.call('HDEL', KEYS[1], 's:' .. ARGV[1])
        if redis.call('HGET', KEYS[1], 'd:' .. ARGV[2]) == ARGV[1] then redis.call('HDEL', KEYS[1], 'd:' .. ARGV[2]) end
        if redis.call('HGET', KEYS[1], 'session') == ARGV[1] then redis.call('HDEL', KEYS[1], 'session', 'addr', 'relay', 'since', 'path') end
        return 1
        """)

    /// What a registration told about the user.
    public struct Registered: Sendable, Equatable {
        /// The user's known receiving devices.
        public var knownDevices: Int
        /// Whether the user has live sessions on other relays.
        public var elsewhere: Bool
        /// Devices forgotten now (not registered for `deviceTTLSeconds`).
        public var forgotten: [String]
        /// The device was not registered: the user has `maxDevices` receiving devices already.
        public var tooManyDevices = false
    }

    /// Writes the session's registration, replacing an older receiving session of the same
    /// device (the newest wins), and records a receiving device as known. The user's sessions
    /// whose relays no longer vouch for them are removed.
    public func register(_ registration: Registration, on eventLoop: EventLoop) -> EventLoopFuture<Registered> {
        let now = WallClock.millisecondsSinceEpoch()
        let incarnation = liveness.incarnation
        let value = Self.value(of: registration, incarnation: incarnation, since: now)
        let call = RedisScript.Call(
            keys: [
                Self.userKey(registration.user), Self.devicesKey(registration.user), InboxStore.logKey(registration.user),
                InboxStore.cursorsKey(registration.user),
            ],
            arguments: [
                registration.session, value, registration.device, registration.receives ? "1" : "0", String(entryTTLSeconds * 1000),
                String(now), String(now - Int64(deviceTTLSeconds) * 1000), registration.route.relayId,
                AddressText.format(registration.route.address) ?? "", String(now),
                InboxStore.ackedPrefix(registration.user), incarnation, Self.pathText(of: registration), String(maxDevices),
            ])
        let seen = ["SET", Self.seenKey(registration.user), String(now), "EX", String(seenTTLSeconds)]
        return Self.registerScript.run([call], after: [seen], on: redis, eventLoop: eventLoop).flatMapThrowing { replies in
            try Self.check(replies)
            guard let items = replies[1].array, items.count >= 2, let known = items[0].integer, let others = items[1].array else {
                throw RedisError("unexpected register reply \(replies[1])")
            }
            let sessions = others.compactMap { $0.string.flatMap(OtherSession.init) }
            var registered = Registered(knownDevices: Int(known), elsewhere: false, forgotten: items.dropFirst(2).compactMap(\.string))
            registered.tooManyDevices = known < 0
            return (registered, sessions)
        }.flatMap { registered, others in
            guard !registered.tooManyDevices else { return eventLoop.makeSucceededFuture(registered) }
            return vouched(others.map { ($0.token, $0.relayId, $0.incarnation, $0.device) }, of: registration.user, on: eventLoop).map { live in
                var registered = registered
                registered.elsewhere = live.contains { $0.relayId != registration.route.relayId }
                return registered
            }
        }
    }

    /// Another session of a user, as the register script lists it: `<relay> <incarnation> <token> <device>`.
    private struct OtherSession {
        var relayId, incarnation, token, device: String
        init?(_ text: String) {
            let parts = text.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false).map(String.init)
            guard parts.count >= 3 else { return nil }
            (relayId, incarnation, token, device) = (parts[0], parts[1], parts[2], parts.count > 3 ? parts[3] : "")
        }
    }

    /// Of `sessions` (token, relay, incarnation, device) of `user`, those whose relay is alive
    /// in the same incarnation (their relay and token). The others are removed from the store
    /// in the background, each only while it still carries that incarnation.
    private func vouched(
        _ sessions: [(token: String, relayId: String, incarnation: String, device: String)], of user: String, on eventLoop: EventLoop
    ) -> EventLoopFuture<[(relayId: String, token: String)]> {
        guard !sessions.isEmpty else { return eventLoop.makeSucceededFuture([]) }
        return liveness.liveIncarnations(of: Set(sessions.map(\.relayId)), on: eventLoop).map { [redis] live in
            let alive = sessions.filter { live[$0.relayId] == $0.incarnation }
            let dead = sessions.filter { live[$0.relayId] != $0.incarnation }
            if !dead.isEmpty {
                let calls = dead.map { RedisScript.Call(keys: [Self.userKey(user)], arguments: [$0.token, $0.device, $0.incarnation]) }
                _ = Self.unregisterScript.run(calls, on: redis, eventLoop: eventLoop) // lazily; the next reader tries again
            }
            return alive.map { ($0.relayId, $0.token) }
        }
    }

    /// Writes the given registrations again with this relay's current incarnation, in one
    /// round trip (a move to a new address or datagram path, a new incarnation after Redis lost the relay's
    /// record, the periodic sweep), re-creating any that Redis lost unless a newer session of
    /// the device has taken over.
    public func refresh(_ registrations: [Registration], on eventLoop: EventLoop) -> EventLoopFuture<Void> {
        guard !registrations.isEmpty else { return eventLoop.makeSucceededVoidFuture() }
        let now = WallClock.millisecondsSinceEpoch()
        let incarnation = liveness.incarnation
        let calls = registrations.map { entry in
            RedisScript.Call(
                keys: [Self.userKey(entry.user)],
                arguments: [
                    entry.session, Self.value(of: entry, incarnation: incarnation, since: now), entry.device, entry.receives ? "1" : "0",
                    String(entryTTLSeconds * 1000), String(now), AddressText.format(entry.route.address) ?? "", entry.route.relayId,
                    Self.pathText(of: entry),
                ])
        }
        return Self.refreshScript.run(calls, on: redis, eventLoop: eventLoop).flatMapThrowing { replies in try Self.check(replies) }
    }

    /// Removes session `session` of `user`'s device `device`.
    public func unregister(user: String, session: String, device: String, on eventLoop: EventLoop) -> EventLoopFuture<Void> {
        Self.unregisterScript.run(.init(keys: [Self.userKey(user)], arguments: [session, device]), on: redis, eventLoop: eventLoop)
            .flatMapThrowing { reply in try Self.check([reply]) }
    }

    /// `user`'s live sessions and known devices, and whether the user exists (credentials, or
    /// registered within `seenTTLSeconds`): one round trip, and a second one to the relays'
    /// liveness records when the user has sessions. A session whose relay is dead, or alive in
    /// another incarnation, is not live (and is removed).
    public func lookup(user: String, on eventLoop: EventLoop) -> EventLoopFuture<UserRoutes> {
        redis.pipeline(
            [
                ["HGETALL", Self.userKey(user)], ["HLEN", Self.devicesKey(user)], ["EXISTS", Self.seenKey(user)],
                ["EXISTS", CredentialStore.key(user)],
            ], on: eventLoop
        )
        .flatMapThrowing { replies in
            try Self.check(replies)
            return (Self.sessions(inFields: replies[0]), replies)
        }.flatMap { sessions, replies in
            vouched(sessions.map { ($0.token, $0.route.relayId, $0.incarnation, $0.device) }, of: user, on: eventLoop).map { alive in
                let tokens = Set(alive.map(\.token))
                let live = sessions.filter { tokens.contains($0.token) }
                let relays = Set(live.map(\.route.relayId))
                let known = replies[2].integer == 1 || replies[3].integer == 1 || !sessions.isEmpty
                return UserRoutes(
                    receivers: live.filter(\.receives).map(\.route), relays: relays.sorted(), knownDevices: Int(replies[1].integer ?? 0),
                    known: known)
            }
        }
    }

    /// Which of `users` have a receiving session that its relay vouches for (presence), in two
    /// round trips.
    public func online(_ users: [String], on eventLoop: EventLoop) -> EventLoopFuture<Set<String>> {
        guard !users.isEmpty else { return eventLoop.makeSucceededFuture([]) }
        return redis.pipeline(users.map { ["HGETALL", Self.userKey($0)] }, on: eventLoop).flatMapThrowing { replies in
            try Self.check(replies)
            return zip(users, replies).map { user, reply in (user, Self.sessions(inFields: reply).filter(\.receives)) }
        }.flatMap { perUser in
            let relays = Set(perUser.flatMap { $0.1.map(\.route.relayId) })
            return liveness.liveIncarnations(of: relays, on: eventLoop).map { live in
                Set(perUser.filter { $0.1.contains { live[$0.route.relayId] == $0.incarnation } }.map(\.0))
            }
        }
    }

    /// The sessions in a `HGETALL` reply of a user's registrations key.
    static func sessions(inFields reply: RedisValue) -> [LiveSession] {
        let fields = reply.array?.compactMap(\.string) ?? []
        return stride(from: 0, to: fields.count - 1, by: 2).compactMap { index in
            fields[index].hasPrefix("s:") ? LiveSession(token: String(fields[index].dropFirst(2)), fields[index + 1]) : nil
        }
    }

    /// The session `session` of `user` if it is still registered; otherwise the user's
    /// newest receiving session (`RelayCore.sessionEndedByOperator` after an operator ended the
    /// user's sessions), or nil.
    public func currentSession(of user: String, session: String, on eventLoop: EventLoop) -> EventLoopFuture<String?> {
        redis.command(["HMGET", Self.userKey(user), "s:" + session, "session"], on: eventLoop).flatMapThrowing { reply in
            try Self.check([reply])
            let fields = reply.array?.map(\.string) ?? []
            guard fields.count == 2 else { throw RedisError("unexpected HMGET reply \(reply)") }
            return fields[0] != nil ? session : fields[1]
        }
    }

    /// A session's field, parsed.
    struct LiveSession {
        var token: String
        var incarnation: String
        var receives: Bool
        var route: Route
        var device: String
        init?(token: String, _ text: String) {
            let parts = text.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: false)
            guard parts.count >= 5, let address = AddressText.parse(String(parts[4])) else { return nil }
            self.token = token
            self.incarnation = String(parts[0])
            self.receives = parts[1] == "r"
            self.route = Route(address: address, relayId: String(parts[3]))
            self.device = parts.count > 5 ? String(parts[5]) : ""
        }
    }

    /// Removes relay `relayId`'s liveness record and every registration in `registrations`.
    public func withdraw(relayId: String, registrations: [Registration], on eventLoop: EventLoop) -> EventLoopFuture<Void> {
        let calls = registrations.map { RedisScript.Call(keys: [Self.userKey($0.user)], arguments: [$0.session, $0.device]) }
        return Self.unregisterScript.run(calls, after: [["DEL", Self.relayKey(relayId)]], on: redis, eventLoop: eventLoop).flatMapThrowing {
            replies in try Self.check(replies)
        }
    }

    static func check(_ replies: [RedisValue]) throws {
        for reply in replies {
            if case .error(let message) = reply { throw RedisError(message) }
            if let nested = reply.array { try check(nested) }
        }
    }
}
