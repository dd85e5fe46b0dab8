import Foundation
import SIMPCore
import SIMPTokens
import XCTest

/// jwt-kit's signature check behind the relay's access tokens: EdDSA and ES256 keys of a JWKS,
/// looked up by `kid`, and the claims read back as the core judges them.
final class JWKSVerifierTests: XCTestCase {
    let issued = Date(timeIntervalSince1970: 1_800_000_000)

    func claims(_ user: String = "bob") -> TokenMint.Claims {
        TokenMint.Claims(subject: user, audience: "simp", issuer: "auth.example", issuedAt: issued, expires: issued.addingTimeInterval(3600))
    }

    func testEdDSAAndES256TokensVerifyAndTheirClaimsAreRead() async throws {
        for algorithm in TokenMint.Algorithm.allCases {
            let pair = try TokenMint.keyPair(kid: "k-\(algorithm.rawValue)", algorithm: algorithm)
            let verifier = try await JWKSVerifier.load(jwks: Data(pair.publicJWKS.utf8))
            let token = try await TokenMint.issue(claims(), privateJWK: pair.privateJWK)
            let expected = AccessTokenClaims(
                subject: "bob", audiences: ["simp"], issuer: "auth.example", expires: 1_800_003_600_000, notBefore: 1_800_000_000_000,
                issuedAt: 1_800_000_000_000)
            XCTAssertEqual(try verifier.verify(token).get(), expected, "\(algorithm)")
        }
    }

    func testAKeyNotInTheSetAnAlteredTokenAndGarbageAreRefused() async throws {
        let pair = try TokenMint.keyPair(kid: "k1")
        let verifier = try await JWKSVerifier.load(jwks: Data(pair.publicJWKS.utf8))
        let other = try TokenMint.keyPair(kid: "k2")
        let foreign = try await TokenMint.issue(claims(), privateJWK: other.privateJWK)
        XCTAssertEqual(verifier.verify(foreign), .failure(.unknownKey("k2")))
        let token = try await TokenMint.issue(claims(), privateJWK: pair.privateJWK)
        var parts = token.split(separator: ".").map(String.init)
        let forged = try await TokenMint.issue(claims("mallory"), privateJWK: pair.privateJWK)
        parts[1] = String(forged.split(separator: ".")[1]) // mallory's claims under bob's signature
        XCTAssertEqual(verifier.verify(parts.joined(separator: ".")), .failure(.badSignature))
        XCTAssertEqual(verifier.verify("garbage"), .failure(.malformed))
    }

    func testRotatingKeepsOldKeysUntilRemovedAndAFileWithoutKidIsRefused() async throws {
        let first = try TokenMint.keyPair(kid: "old"), second = try TokenMint.keyPair(kid: "new", algorithm: .es256)
        let both = try TokenMint.addingKeys(of: second.publicJWKS, to: Data(first.publicJWKS.utf8))
        let verifier = try await JWKSVerifier.load(jwks: Data(both.utf8))
        XCTAssertEqual(verifier.keyIds, ["new", "old"])
        do {
            _ = try await JWKSVerifier.load(jwks: Data(#"{"keys":[{"kty":"OKP","crv":"Ed25519","x":"AAAA"}]}"#.utf8))
            XCTFail("a key without kid was taken")
        } catch {
            XCTAssertEqual("\(error)", "a key has no \"kid\"")
        }
    }
}
