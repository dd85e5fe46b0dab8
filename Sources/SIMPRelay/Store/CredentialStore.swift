import NIOCore
import SIMPCore
import SIMPRedis

/// Users' password verifiers in Redis (docs/PROTOCOL.md §7.6): `simp:cred:{<user>}`, a hash of
/// `salt`, `iterations`, `storedKey`, `serverKey` (hex), `created` (ms since the epoch) and,
/// while an operator has locked the user, `locked` (ms since the epoch). No password and
/// nothing that logs in by itself is stored. `simp:cred-iterations` counts the users of each
/// iteration count (for decoys); `simp:decoy-secret` keys the decoys of every relay.
public struct CredentialStore: Sendable {
    public let redis: any RedisCommands

    public init(redis: any RedisCommands) { self.redis = redis }

    /// The Redis key of `user`'s verifier.
    public static func key(_ user: String) -> String { keyPrefix + KeyTag.user(user) }
    /// What every verifier key starts with (then the user's tag).
    public static let keyPrefix = "simp:cred:"
    /// The hash of iteration count → users with it.
    public static let iterationCountsKey = "simp:cred-iterations"
    /// The secret that keys every relay's decoys (hex of 32 random bytes).
    public static let decoySecretKey = "simp:decoy-secret"

    /// Why a credential command failed, in words for the operator.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        case exists(String), noSuchUser(String), corrupt(String)
        public var description: String {
            switch self {
            case .exists(let user): return "user \"\(user)\" already exists (use --replace to set a new password)"
            case .noSuchUser(let user): return "no user \"\(user)\""
            case .corrupt(let user): return "the stored credentials of \"\(user)\" are unreadable"
            }
        }
    }

    /// What a login as `user` on `connection` needs, as the store answers `.fetchVerifier`: the
    /// verifier (nil if the user does not exist), the lock, and the iteration counts (read for
    /// real and missing users alike, so both cost the same round trip).
    public func login(of user: String, from host: String, on connection: ConnectionID, on eventLoop: EventLoop) -> EventLoopFuture<StoreAnswer> {
        redis.pipeline(
            [
                ["HMGET", Self.key(user), "salt", "iterations", "storedKey", "serverKey", "locked"],
                ["HGETALL", Self.iterationCountsKey],
                ["HMGET", Self.failuresKey(user, from: host), "n", "last"], ["HMGET", Self.failuresKey(user), "n", "last"],
                ["ZSCORE", Self.knownAddressesKey(user), host],
                ["GET", Self.tokensDeniedKey(user)],
            ], on: eventLoop
        )
        .flatMapThrowing { replies in
            try Registry.check(replies)
            let counts = Self.iterationCounts(replies[1])
            let now = WallClock.millisecondsSinceEpoch()
            let failures = SharedLoginFailures(
                fromSource: Self.count(replies[2], now: now), byName: Self.count(replies[3], now: now), sourceIsKnown: replies[4].string != nil)
            let fields = replies[0].array?.map(\.string) ?? []
            let deniedBefore = replies[5].string.flatMap { Int64($0) }
            guard fields.count == 5, let salt = fields[0] else {
                return .fetchVerifier(connection: connection, nil, iterationCounts: counts, failures: failures, tokensDeniedBefore: deniedBefore)
            }
            guard let salt = Hex.decode(salt), let iterations = fields[1].flatMap({ UInt32($0) }),
                let storedKey = fields[2].flatMap(Hex.decode), let serverKey = fields[3].flatMap(Hex.decode)
            else { throw Failure.corrupt(user) }
            let verifier = PasswordVerifier(salt: salt, iterations: iterations, storedKey: storedKey, serverKey: serverKey)
            return .fetchVerifier(
                connection: connection, verifier, locked: fields[4] != nil, iterationCounts: counts, failures: failures,
                tokensDeniedBefore: deniedBefore)
        }
    }

    // MARK: Failed logins shared by every relay (docs/PROTOCOL.md §4.2, §7.6)

    /// A hash of `n` (failures in a row) and `last` (ms since the epoch) for `user`'s failures
    /// from `host`, or (without a host) from addresses it has not logged in from lately; it
    /// expires once its count is forgotten.
    public static func failuresKey(_ user: String, from host: String? = nil) -> String {
        "simp:logins:" + KeyTag.user(user) + (host.map { ":from:" + $0 } ?? ":name")
    }
    /// A sorted set of `user`'s recent successful-login addresses, by time (ms since the epoch).
    public static func knownAddressesKey(_ user: String) -> String { "simp:logins:" + KeyTag.user(user) + ":known" }

    private static func count(_ reply: RedisValue, now: Int64) -> SharedLoginFailures.Count? {
        let fields = reply.array?.map(\.string) ?? []
        guard fields.count == 2, let failures = fields[0].flatMap({ Int($0) }), let last = fields[1].flatMap({ Int64($0) }) else { return nil }
        return SharedLoginFailures.Count(failures: failures, sinceLast: .milliseconds(max(0, now - last)))
    }

    /// Adds a login's outcome to the shared counts: a failure counts at its address (and by
    /// name, `byName`); a success clears its address's count and makes it a known address
    /// (the newest `knownAddresses` of the last `knownFor` are kept).
    public func record(_ outcome: LoginOutcome, on eventLoop: EventLoop) -> EventLoopFuture<Void> {
        let now = WallClock.millisecondsSinceEpoch(), policy = outcome.policy
        let source = Self.failuresKey(outcome.user, from: outcome.host), name = Self.failuresKey(outcome.user)
        var commands: [[String]]
        if outcome.succeeded {
            let known = Self.knownAddressesKey(outcome.user), keep = Int64(policy.knownFor.nanoseconds / 1_000_000)
            commands = [
                ["DEL", source], ["ZADD", known, String(now), outcome.host], ["ZREMRANGEBYSCORE", known, "-inf", String(now - keep)],
                ["ZREMRANGEBYRANK", known, "0", String(-max(policy.knownAddresses, 1) - 1)], ["PEXPIRE", known, String(keep)],
            ]
        } else {
            commands = Self.failure(source, forgetAfter: policy.perSource.forgetAfter, now: now)
            if outcome.byName { commands += Self.failure(name, forgetAfter: policy.perName.forgetAfter, now: now) }
        }
        return redis.pipeline(commands, on: eventLoop).flatMapThrowing { try Registry.check($0) }
    }

    private static func failure(_ key: String, forgetAfter: TimeAmount, now: Int64) -> [[String]] {
        [["HINCRBY", key, "n", "1"], ["HSET", key, "last", String(now)], ["PEXPIRE", key, String(forgetAfter.nanoseconds / 1_000_000)]]
    }

    /// The decoy secret, created (32 random bytes) by the first relay that asks; that relay
    /// also counts the users already stored (created before the counts were kept).
    public func decoySecret() async throws -> [UInt8] {
        let replies = try await redis.pipeline([
            ["SET", Self.decoySecretKey, Hex.encode(LoginCrypto.randomBytes(32)), "NX"],
            ["GET", Self.decoySecretKey],
        ])
        try Registry.check(replies)
        guard let secret = replies[1].string.flatMap(Hex.decode), secret.count >= 16 else {
            throw StoreFailure("\(Self.decoySecretKey) is not hex of at least 16 bytes")
        }
        if replies[0].string == "OK" { try await recountIterations() }
        return secret
    }

    /// Rewrites the iteration counts from the stored users.
    public func recountIterations() async throws {
        var counts: [String: Int] = [:]
        for user in try await users() {
            if let iterations = try await storedIterations(of: user) { counts[iterations, default: 0] += 1 }
        }
        let fields = counts.flatMap { [$0.key, String($0.value)] }
        let replies = try await redis.pipeline(
            [["DEL", Self.iterationCountsKey]] + (fields.isEmpty ? [] : [["HSET", Self.iterationCountsKey] + fields]))
        try Registry.check(replies)
    }

    /// Users per iteration count.
    public func iterationCounts() async throws -> [UInt32: Int] {
        let reply = try await redis.command(["HGETALL", Self.iterationCountsKey])
        try Registry.check([reply])
        return Self.iterationCounts(reply)
    }

    private static func iterationCounts(_ reply: RedisValue) -> [UInt32: Int] {
        let flat = reply.array?.map(\.string) ?? []
        var counts: [UInt32: Int] = [:]
        for index in stride(from: 0, to: flat.count - 1, by: 2) {
            if let iterations = flat[index].flatMap({ UInt32($0) }), let users = flat[index + 1].flatMap({ Int($0) }), users > 0 {
                counts[iterations] = users
            }
        }
        return counts
    }

    /// Counts one more (`by` 1) or one fewer (-1) user with `iterations`.
    private func count(_ iterations: String, by change: Int) async throws {
        let reply = try await redis.command(["HINCRBY", Self.iterationCountsKey, iterations, String(change)])
        try Registry.check([reply])
        if let left = reply.integer, left <= 0 {
            try Registry.check([try await redis.command(["HDEL", Self.iterationCountsKey, iterations])])
        }
    }

    /// The iteration count stored for `user`, nil if none.
    private func storedIterations(of user: String) async throws -> String? {
        let reply = try await redis.command(["HGET", Self.key(user), "iterations"])
        try Registry.check([reply])
        return reply.string
    }

    /// Stores `user`'s verifier; fails if the user exists, unless `replace`.
    public func add(_ user: String, verifier: PasswordVerifier, replace: Bool) async throws {
        let key = Self.key(user)
        let fields = [
            "salt", Hex.encode(verifier.salt), "iterations", String(verifier.iterations),
            "storedKey", Hex.encode(verifier.storedKey), "serverKey", Hex.encode(verifier.serverKey),
            "created", String(WallClock.millisecondsSinceEpoch()),
        ]
        if replace {
            let old = try await storedIterations(of: user)
            let replies = try await redis.pipeline([["MULTI"], ["DEL", key], ["HSET", key] + fields, ["EXEC"]])
            try Registry.check(replies)
            if let old { try await count(old, by: -1) }
            return try await count(String(verifier.iterations), by: 1)
        }
        // HSETNX on `salt` claims the user atomically; the other fields follow.
        let claimed = try await redis.command(["HSETNX", key, "salt", Hex.encode(verifier.salt)])
        try Registry.check([claimed])
        guard claimed.integer == 1 else { throw Failure.exists(user) }
        try Registry.check([try await redis.command(["HSET", key] + fields)])
        try await count(String(verifier.iterations), by: 1)
    }

    /// Removes `user`.
    public func remove(_ user: String) async throws {
        let old = try await storedIterations(of: user)
        let reply = try await redis.command(["DEL", Self.key(user)])
        try Registry.check([reply])
        guard reply.integer == 1 else { throw Failure.noSuchUser(user) }
        if let old { try await count(old, by: -1) }
    }

    /// Locks (`true`) or unlocks `user`: a locked user's logins fail, with the same answer as a
    /// wrong password; sessions already open go on (end them with `simp-server sessions end`).
    public func setLocked(_ user: String, _ locked: Bool) async throws {
        guard try await storedIterations(of: user) != nil else { throw Failure.noSuchUser(user) }
        let change = locked ? ["HSET", Self.key(user), "locked", String(WallClock.millisecondsSinceEpoch())] : ["HDEL", Self.key(user), "locked"]
        try Registry.check([try await redis.command(change)])
    }

    /// The Redis key of the time (ms since the epoch) before which `user`'s access tokens are
    /// refused (docs/PROTOCOL.md §4.9, §7.6).
    public static func tokensDeniedKey(_ user: String) -> String { "simp:tokens-denied:" + KeyTag.user(user) }

    /// Refuses `user`'s access tokens issued before `millis` (ms since the epoch), at login and
    /// refresh, from now on; a later time replaces an earlier one. Users without a password
    /// can be denied too (a token user need not exist in the store).
    public func denyTokens(of user: String, issuedBefore millis: Int64) async throws {
        try Registry.check([try await redis.command(["SET", Self.tokensDeniedKey(user), String(millis)])])
    }

    /// The time before which `user`'s tokens are refused, nil if none.
    public func tokensDenied(of user: String) async throws -> Int64? {
        let reply = try await redis.command(["GET", Self.tokensDeniedKey(user)])
        try Registry.check([reply])
        return reply.string.flatMap { Int64($0) }
    }

    /// Whether `user` is locked.
    public func isLocked(_ user: String) async throws -> Bool {
        let reply = try await redis.command(["HEXISTS", Self.key(user), "locked"])
        try Registry.check([reply])
        return reply.integer == 1
    }

    /// Every user with credentials, sorted (`SCAN` on every master).
    public func users() async throws -> [String] {
        try await redis.scanKeys(matching: Self.keyPrefix + "*").compactMap { KeyTag.user(inKey: $0, prefix: Self.keyPrefix) }.sorted()
    }
}
