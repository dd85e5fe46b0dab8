import Crypto
import Foundation
import JWTKit

/// Keys and tokens for tests and small setups (`simp-server token keygen`, `token issue`):
/// an Ed25519 or P-256 key pair as JWKs, and access tokens signed with the private one.
public enum TokenMint {
    /// The signature algorithms the relay accepts.
    public enum Algorithm: String, CaseIterable, Sendable {
        case eddsa = "EdDSA", es256 = "ES256"
    }

    /// A new key pair: the private JWK (keep it with the issuer) and the JWKS holding only the
    /// public key (give it to the relay with `--jwks`), both as JSON text.
    public static func keyPair(kid: String, algorithm: Algorithm = .eddsa) throws -> (privateJWK: String, publicJWKS: String) {
        let publicJWK: JWK, privateJWK: JWK
        switch algorithm {
        case .eddsa:
            let key = try EdDSA.PrivateKey(curve: .ed25519)
            let x = base64URL(key.publicKey.rawRepresentation), d = base64URL(key.rawRepresentation)
            publicJWK = .octetKeyPair(.eddsa, identifier: JWKIdentifier(string: kid), x: x, y: nil, curve: .ed25519)
            privateJWK = .octetKeyPair(.eddsa, identifier: JWKIdentifier(string: kid), x: x, y: nil, curve: .ed25519, privateKey: d)
        case .es256:
            let raw = P256.Signing.PrivateKey()
            guard let point = try ES256PrivateKey(backing: raw).parameters else {
                throw JWKSVerifier.LoadError(description: "P-256 key without coordinates")
            }
            let d = base64URL(raw.rawRepresentation)
            publicJWK = .ecdsa(.es256, identifier: JWKIdentifier(string: kid), x: point.x, y: point.y, curve: .p256)
            privateJWK = .ecdsa(.es256, identifier: JWKIdentifier(string: kid), x: point.x, y: point.y, curve: .p256, privateKey: d)
        }
        return (try json(privateJWK), try json(JWKS(keys: [publicJWK])))
    }

    /// The claims of a new token.
    public struct Claims: Sendable {
        public var subject: String
        public var audience: String
        public var issuer: String?
        /// `iat` and `nbf`, seconds since the epoch.
        public var issuedAt: Date
        /// `exp`.
        public var expires: Date

        public init(subject: String, audience: String, issuer: String? = nil, issuedAt: Date, expires: Date) {
            self.subject = subject
            self.audience = audience
            self.issuer = issuer
            self.issuedAt = issuedAt
            self.expires = expires
        }
    }

    /// A token with `claims`, signed with `privateJWK` (JSON text of a JWK with its private part
    /// and a `kid`, as `keyPair` writes it).
    public static func issue(_ claims: Claims, privateJWK: String) async throws -> String {
        let jwk = try JWK(json: privateJWK)
        guard let kid = jwk.keyIdentifier else { throw JWKSVerifier.LoadError(description: "the key has no \"kid\"") }
        let collection = JWTKeyCollection()
        try await collection.add(jwk: jwk)
        let issuedAt = Date(timeIntervalSince1970: claims.issuedAt.timeIntervalSince1970.rounded(.down)) // whole seconds
        let expires = Date(timeIntervalSince1970: claims.expires.timeIntervalSince1970.rounded(.down))
        let payload = IssuedClaims(
            sub: SubjectClaim(value: claims.subject), aud: AudienceClaim(value: [claims.audience]),
            iss: claims.issuer.map { IssuerClaim(value: $0) }, exp: ExpirationClaim(value: expires),
            nbf: NotBeforeClaim(value: issuedAt), iat: IssuedAtClaim(value: issuedAt))
        var header = JWTHeader()
        header.alg = jwk.algorithm?.rawValue
        return try await collection.sign(payload, kid: kid, header: header)
    }

    private static func json(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    private static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// The claims `TokenMint.issue` signs.
private struct IssuedClaims: JWTPayload {
    var sub: SubjectClaim
    var aud: AudienceClaim
    var iss: IssuerClaim?
    var exp: ExpirationClaim
    var nbf: NotBeforeClaim
    var iat: IssuedAtClaim

    func verify(using algorithm: some JWTAlgorithm) throws {}
}

extension TokenMint {
    /// The JWKS `existing` (nil: none yet) with the keys of the JWKS `added`, as JSON text; a
    /// key of `existing` with an id of `added` is replaced.
    public static func addingKeys(of added: String, to existing: Data?) throws -> String {
        let decoder = JSONDecoder()
        let new = try decoder.decode(JWKS.self, from: Data(added.utf8))
        let newIds = Set(new.keys.compactMap { $0.keyIdentifier?.string })
        let old = try existing.map { try decoder.decode(JWKS.self, from: $0) }?.keys ?? []
        let kept = old.filter { !newIds.contains($0.keyIdentifier?.string ?? "") }
        return try json(JWKS(keys: kept + new.keys))
    }
}
