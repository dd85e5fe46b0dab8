/// When a client renews its session's access token on the same connection (docs/PROTOCOL.md
/// §4.9): a third of the time left before `exp`, at most a minute early, so a short token is
/// renewed with time to spare and a long one shortly before it runs out. Times in ms.
public enum AccessTokenRenewal {
    /// Milliseconds from `nowMillis` until the token expiring at `expires` should be renewed.
    public static func delay(expires: Int64, nowMillis: Int64) -> Int64 {
        let left = expires - nowMillis
        guard left > 0 else { return 0 }
        return left - min(60_000, left / 3)
    }

    /// After a renewal failed (the token source failed, or the relay refused the new token):
    /// milliseconds until the next try, half the time left but at most 5 s; nil once the token
    /// has expired (the relay ends the session).
    public static func retryDelay(expires: Int64, nowMillis: Int64) -> Int64? {
        let left = expires - nowMillis
        guard left > 0 else { return nil }
        return max(100, min(5_000, left / 2))
    }
}

extension SIMPMessage.ErrorCode {
    /// Whether the relay refused an access token at login (the same token cannot succeed).
    public var refusesToken: Bool { self == .tokenRefused || self == .tokenExpired || self == .tokenNotAccepted }
}
