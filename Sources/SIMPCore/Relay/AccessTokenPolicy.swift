/// Whether an access token may log a user in (or renew a session) now, and if not, which error
/// says why (docs/PROTOCOL.md §4.9). Pure: the time is a parameter.
public struct AccessTokenPolicy: Sendable {
    /// The `aud` a token must name (`--token-audience`).
    public var audience: String
    /// The `iss` a token must carry, if the operator set one (`--token-issuer`).
    public var issuer: String?
    /// How far `exp` and `nbf` may be off, for clocks that differ (`--token-leeway`).
    public var leewayMillis: Int64
    /// Checks the signature and reads the claims (replaced when the key set is reloaded).
    public var verifier: any AccessTokenVerifier
    /// Whether a token from an address other than loopback is refused: the control channel is
    /// plain TCP and the operator did not allow tokens over it (`--allow-token-without-tls`).
    public var loopbackOnly: Bool

    /// The leeway unless the operator sets another: 30 s.
    public static let defaultLeewayMillis: Int64 = 30_000

    public init(
        audience: String, issuer: String? = nil, leewayMillis: Int64 = Self.defaultLeewayMillis,
        verifier: any AccessTokenVerifier = NoAccessTokenKeys(), loopbackOnly: Bool = false
    ) {
        self.audience = audience
        self.issuer = issuer
        self.leewayMillis = leewayMillis
        self.verifier = verifier
        self.loopbackOnly = loopbackOnly
    }

    /// A token refused: the ERROR's code and text (which never quote the token), and a reason
    /// for the relay's log.
    public struct Refusal: Error, Sendable, Equatable {
        public var code: SIMPMessage.ErrorCode
        public var text: String
        public var reason: String
    }

    /// `token`, presented for `user` at `nowMillis`: its claims when it may be used, the
    /// refusal otherwise. `deniedBefore` is the operator's `deny-tokens` time for the user:
    /// tokens issued before it are refused.
    public func judge(_ token: String, for user: String, nowMillis: Int64, deniedBefore: Int64? = nil) -> Result<AccessTokenClaims, Refusal> {
        let claims: AccessTokenClaims
        switch verifier.verify(token) {
        case .success(let read): claims = read
        case .failure(let failure): return .failure(Self.refusal(failure))
        }
        if let refusal = check(claims, for: user, nowMillis: nowMillis, deniedBefore: deniedBefore) { return .failure(refusal) }
        return .success(claims)
    }

    /// The refusal of `claims` (already signature-checked) for `user` at `nowMillis`, nil if they
    /// are acceptable.
    public func check(_ claims: AccessTokenClaims, for user: String, nowMillis: Int64, deniedBefore: Int64? = nil) -> Refusal? {
        guard let expires = claims.expires else {
            return Refusal(code: .tokenRefused, text: "access token refused: it has no expiry (exp)", reason: "no exp")
        }
        if nowMillis > expires + leewayMillis {
            return Refusal(
                code: .tokenExpired, text: "access token expired \(Self.ago(nowMillis - expires)) ago: get a new one",
                reason: "expired at \(expires)")
        }
        if let notBefore = claims.notBefore, nowMillis + leewayMillis < notBefore {
            return Refusal(
                code: .tokenRefused,
                text: "access token not valid yet (valid in \(Self.ago(notBefore - nowMillis))): is this computer's clock right?",
                reason: "not before \(notBefore)")
        }
        guard claims.audiences.contains(audience) else {
            return Refusal(
                code: .tokenRefused, text: "access token refused: it is meant for another service (wrong audience)",
                reason: "audience \(claims.audiences) is not \(audience)")
        }
        if let issuer, claims.issuer != issuer {
            return Refusal(
                code: .tokenRefused, text: "access token refused: issued by someone this relay does not trust (wrong issuer)",
                reason: "issuer \(claims.issuer ?? "none") is not \(issuer)")
        }
        guard claims.subject == user else {
            return Refusal(
                code: .tokenRefused, text: "access token refused: it is for another user than \(user)",
                reason: "token for \"\(claims.subject)\" presented as \"\(user)\"")
        }
        if let deniedBefore, (claims.issuedAt ?? Int64.min) < deniedBefore {
            return Refusal(
                code: .tokenRefused, text: "access token refused: the relay's operator revoked tokens issued before it; get a new one",
                reason: "issued before the user's deny-tokens time \(deniedBefore)")
        }
        return nil
    }

    private static func refusal(_ failure: AccessTokenSignatureFailure) -> Refusal {
        switch failure {
        case .malformed:
            return Refusal(code: .tokenRefused, text: "access token refused: not a JWT this relay can read", reason: "malformed")
        case .unknownKey(let kid):
            return Refusal(
                code: .tokenRefused, text: "access token refused: signed with a key this relay does not know",
                reason: "unknown key \(kid.map { "\"\($0)\"" } ?? "(no kid)")")
        case .badSignature:
            return Refusal(code: .tokenRefused, text: "access token refused: its signature is wrong", reason: "bad signature")
        case .unsupportedAlgorithm(let algorithm):
            return Refusal(
                code: .tokenRefused, text: "access token refused: algorithm \(algorithm) is not accepted (EdDSA or ES256)",
                reason: "algorithm \(algorithm)")
        }
    }

    /// A duration in milliseconds as people read it ("3 s", "2 min", "5 h").
    static func ago(_ millis: Int64) -> String {
        let seconds = max(0, millis) / 1000
        if seconds < 120 { return "\(seconds) s" }
        if seconds < 7200 { return "\(seconds / 60) min" }
        return "\(seconds / 3600) h"
    }

    /// Whether `host` (a peer's IP address) is a loopback address.
    public static func isLoopback(_ host: String) -> Bool {
        host.hasPrefix("127.") || host == "::1" || host.hasPrefix("::ffff:127.")
    }
}
