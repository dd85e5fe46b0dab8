import Foundation
import JWTKit
import SIMPCore

/// The relay's access-token signature check (docs/PROTOCOL.md §4.9): the public keys of a JWKS
/// (Ed25519 for EdDSA, P-256 for ES256), looked up by the token's `kid`. jwt-kit parses the
/// token and the keys and checks the signature; the claims are judged by the core's
/// `AccessTokenPolicy`. Build it with `load(jwks:)` (jwt-kit hands keys out asynchronously);
/// `verify` is then synchronous, as the core needs.
public struct JWKSVerifier: AccessTokenVerifier {
    /// The key set could not be used; the text says why.
    public struct LoadError: Error, CustomStringConvertible {
        public var description: String
    }

    private let keys: [String: any JWTAlgorithm]

    /// The key ids, sorted (for the relay's log: which keys it took).
    public var keyIds: [String] { keys.keys.sorted() }

    /// The verifier for a JWKS document (`{"keys": [...]}`): every key needs a `kid`; keys of
    /// other types than OKP/Ed25519 and EC/P-256 are refused, so a typo does not go unnoticed.
    public static func load(jwks data: Data) async throws -> JWKSVerifier {
        let set: JWKS
        do { set = try JSONDecoder().decode(JWKS.self, from: data) } catch {
            throw LoadError(description: "not a JWKS document ({\"keys\": [...]}): \(error)")
        }
        let collection = JWTKeyCollection()
        var keys: [String: any JWTAlgorithm] = [:]
        for jwk in set.keys {
            guard let kid = jwk.keyIdentifier?.string, !kid.isEmpty else { throw LoadError(description: "a key has no \"kid\"") }
            guard let algorithm = Self.algorithm(of: jwk) else {
                throw LoadError(description: "key \"\(kid)\" is neither an Ed25519 (OKP) nor a P-256 (EC) public key")
            }
            do {
                try await collection.add(jwk: jwk)
                keys[kid] = try await collection.getKey(for: jwk.keyIdentifier, alg: algorithm.rawValue)
            } catch { throw LoadError(description: "key \"\(kid)\" is unusable: \(error)") }
        }
        return JWKSVerifier(keys: keys)
    }

    private static func algorithm(of jwk: JWK) -> JWK.Algorithm? {
        switch (jwk.keyType, jwk.curve?.rawValue) {
        case (.octetKeyPair, "Ed25519"): return .eddsa
        case (.ecdsa, "P-256"): return .es256
        default: return nil
        }
    }

    /// The claims of `token` if one of the keys signed it.
    public func verify(_ token: String) -> Result<AccessTokenClaims, AccessTokenSignatureFailure> {
        let parser = DefaultJWTParser()
        let header: JWTHeader, claims: TokenClaims, signature: Data
        let signingInput: [UInt8]
        do {
            (header, claims, signature) = try parser.parse(Array(token.utf8), as: TokenClaims.self)
            let parts = try parser.getTokenParts(Array(token.utf8))
            signingInput = Array(parts.header) + Array(".".utf8) + Array(parts.payload)
        } catch { return .failure(.malformed) }
        let key: any JWTAlgorithm
        if let kid = header.kid {
            guard let found = keys[kid] else { return .failure(.unknownKey(kid)) }
            key = found
        } else {
            guard keys.count == 1, let only = keys.values.first else { return .failure(.unknownKey(nil)) }
            key = only
        }
        guard let alg = header.alg, alg == key.name else { return .failure(.unsupportedAlgorithm(header.alg ?? "none")) }
        guard (try? key.verify(signature, signs: signingInput)) == true else { return .failure(.badSignature) }
        return .success(claims.claims)
    }
}

/// The registered claims the relay reads (RFC 7519 §4.1), as jwt-kit decodes them; the relay
/// judges them itself (with its own clock), so `verify(using:)` accepts everything.
struct TokenClaims: JWTPayload {
    var sub: SubjectClaim
    var aud: AudienceClaim?
    var iss: IssuerClaim?
    var exp: ExpirationClaim?
    var nbf: NotBeforeClaim?
    var iat: IssuedAtClaim?

    func verify(using algorithm: some JWTAlgorithm) throws {}

    var claims: AccessTokenClaims {
        AccessTokenClaims(
            subject: sub.value, audiences: aud?.value ?? [], issuer: iss?.value, expires: exp.map { Self.millis($0.value) },
            notBefore: nbf.map { Self.millis($0.value) }, issuedAt: iat.map { Self.millis($0.value) })
    }

    static func millis(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
}
