/// What a signed access token (a JWT, docs/PROTOCOL.md §4.9) says, once its signature is known
/// to be right. Times are milliseconds since the Unix epoch.
public struct AccessTokenClaims: Sendable, Equatable {
    /// `sub`: the SIMP user the token logs in.
    public var subject: String
    /// `aud`: the audiences the token is meant for (a single string in the token is one).
    public var audiences: [String]
    /// `iss`: who issued it.
    public var issuer: String?
    /// `exp`: when it stops being valid (required by the relay).
    public var expires: Int64?
    /// `nbf`: when it starts being valid.
    public var notBefore: Int64?
    /// `iat`: when it was issued (compared with the operator's `deny-tokens` time).
    public var issuedAt: Int64?

    public init(
        subject: String, audiences: [String], issuer: String? = nil, expires: Int64? = nil, notBefore: Int64? = nil, issuedAt: Int64? = nil
    ) {
        self.subject = subject
        self.audiences = audiences
        self.issuer = issuer
        self.expires = expires
        self.notBefore = notBefore
        self.issuedAt = issuedAt
    }
}

/// Why a token's signature could not be accepted (before any claim is looked at).
public enum AccessTokenSignatureFailure: Error, Sendable, Equatable {
    /// Not a JWT, or its header or claims are not JSON the relay reads.
    case malformed
    /// No key of the relay's key set has this `kid` (nil: the token names none and the set has several).
    case unknownKey(String?)
    /// The key was found but the signature is not its.
    case badSignature
    /// An algorithm other than EdDSA or ES256, or not the key's.
    case unsupportedAlgorithm(String)
}

/// Checks an access token's signature against the operator's keys and reads its claims;
/// synchronous and without I/O, so the relay core can call it. `SIMPTokens`' `JWKSVerifier`
/// is the production one.
public protocol AccessTokenVerifier: Sendable {
    /// The claims of `token` if it is signed by one of the keys, else why not.
    func verify(_ token: String) -> Result<AccessTokenClaims, AccessTokenSignatureFailure>
}

/// A verifier that knows no keys: every token is refused as signed by an unknown key (a relay
/// whose key set could not be read yet).
public struct NoAccessTokenKeys: AccessTokenVerifier {
    public init() {}
    public func verify(_ token: String) -> Result<AccessTokenClaims, AccessTokenSignatureFailure> { .failure(.unknownKey(nil)) }
}
