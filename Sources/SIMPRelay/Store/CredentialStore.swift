import NIOCore
import SIMPCore
import SIMPRedis

/// Users' password verifiers in Redis (docs/PROTOCOL.md §7.6): `simp:cred:<user>`, a hash of
/// `salt`, `iterations`, `storedKey`, `serverKey` (hex) and `created` (ms since the epoch). No
/// password and nothing that logs in by itself is stored.
public struct CredentialStore: Sendable {
    public let redis: RedisClient

    public init(redis: RedisClient) { self.redis = redis }

    /// The Redis key of `user`'s verifier.
    public static func key(_ user: String) -> String { "simp:cred:\(user)" }

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

    /// `user`'s verifier, nil if the user does not exist.
    public func verifier(of user: String, on eventLoop: EventLoop) -> EventLoopFuture<PasswordVerifier?> {
        redis.command(["HMGET", Self.key(user), "salt", "iterations", "storedKey", "serverKey"], on: eventLoop)
            .flatMapThrowing { reply in
                try Registry.check([reply])
                let fields = reply.array?.map(\.string) ?? []
                guard fields.count == 4, let salt = fields[0] else { return nil }
                guard let salt = Hex.decode(salt), let iterations = fields[1].flatMap({ UInt32($0) }),
                      let storedKey = fields[2].flatMap(Hex.decode), let serverKey = fields[3].flatMap(Hex.decode)
                else { throw Failure.corrupt(user) }
                return PasswordVerifier(salt: salt, iterations: iterations, storedKey: storedKey, serverKey: serverKey)
            }
    }

    /// Stores `user`'s verifier; fails if the user exists, unless `replace`.
    public func add(_ user: String, verifier: PasswordVerifier, replace: Bool) async throws {
        let key = Self.key(user)
        let fields = ["salt", Hex.encode(verifier.salt), "iterations", String(verifier.iterations),
                      "storedKey", Hex.encode(verifier.storedKey), "serverKey", Hex.encode(verifier.serverKey),
                      "created", String(WallClock.millisecondsSinceEpoch())]
        if replace {
            let replies = try await redis.pipeline([["MULTI"], ["DEL", key], ["HSET", key] + fields, ["EXEC"]])
            return try Registry.check(replies)
        }
        // HSETNX on `salt` claims the user atomically; the other fields follow.
        let claimed = try await redis.command(["HSETNX", key, "salt", Hex.encode(verifier.salt)])
        try Registry.check([claimed])
        guard claimed.integer == 1 else { throw Failure.exists(user) }
        try Registry.check([try await redis.command(["HSET", key] + fields)])
    }

    /// Removes `user`.
    public func remove(_ user: String) async throws {
        let reply = try await redis.command(["DEL", Self.key(user)])
        try Registry.check([reply])
        guard reply.integer == 1 else { throw Failure.noSuchUser(user) }
    }

    /// Every user with credentials, sorted.
    public func users() async throws -> [String] {
        var cursor = "0", users: [String] = []
        repeat {
            let reply = try await redis.command(["SCAN", cursor, "MATCH", "simp:cred:*", "COUNT", "500"])
            try Registry.check([reply])
            guard let parts = reply.array, parts.count == 2, let next = parts[0].string else { break }
            cursor = next
            users += (parts[1].array ?? []).compactMap { $0.string.map { String($0.dropFirst("simp:cred:".count)) } }
        } while cursor != "0"
        return users.sorted()
    }
}
