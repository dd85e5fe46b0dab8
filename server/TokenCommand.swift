import ArgumentParser
import Foundation
import SIMPCore
import SIMPTokens

/// `simp-server token keygen|issue`: a signing key pair and access tokens, for tests and small
/// setups (an operator's own auth service issues them otherwise; docs/OPERATIONS.md).
struct TokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Make a key pair for access tokens, or mint a token (for tests and small setups).",
        subcommands: [Keygen.self, Issue.self])

    struct Keygen: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a new signing key: DIR/KID.private.jwk (for the issuer, mode 600) and DIR/jwks.json (for the relay's --jwks).",
            discussion: "An existing jwks.json gets the new public key added, so keys can be rotated: add the new one, then remove the old one.")

        @Option(help: ArgumentHelp("Folder to write into (created if missing).", valueName: "dir"))
        var out: String

        @Option(help: "Key id (kid) of the new key. Default: key- and the date and time.")
        var kid: String?

        @Option(help: "EdDSA (Ed25519) or ES256 (P-256).")
        var algorithm = "EdDSA"

        func run() async throws {
            guard let algorithm = TokenMint.Algorithm(rawValue: algorithm) else {
                throw ValidationError("--algorithm must be EdDSA or ES256")
            }
            let kid = kid ?? "key-" + ISO8601DateFormatter().string(from: Date()).filter { $0.isNumber }
            let pair = try TokenMint.keyPair(kid: kid, algorithm: algorithm)
            let folder = URL(fileURLWithPath: out)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let privatePath = folder.appendingPathComponent("\(kid).private.jwk").path
            guard FileManager.default.createFile(atPath: privatePath, contents: Data(pair.privateJWK.utf8), attributes: [.posixPermissions: 0o600])
            else { throw ValidationError("cannot write \(privatePath)") }
            let jwksURL = folder.appendingPathComponent("jwks.json")
            let jwks = try TokenMint.addingKeys(of: pair.publicJWKS, to: try? Data(contentsOf: jwksURL))
            try Data(jwks.utf8).write(to: jwksURL, options: .atomic)
            print("wrote \(privatePath) (private: keep it with the issuer) and \(jwksURL.path) (public: give it to the relay with --jwks)")
        }
    }

    struct Issue: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print an access token for USER, signed with a private key from `token keygen`.",
            discussion: "The token logs USER in on a relay whose --jwks holds the public key and whose --token-audience is --audience.")

        @Argument(help: "The user id (the token's sub).")
        var user: String

        @Option(help: ArgumentHelp("The private JWK file.", valueName: "file"))
        var key: String

        @Option(help: "How long the token is valid: 90s, 15m, 1h, 2d.")
        var ttl = "1h"

        @Option(help: "The audience (aud): the relay's --token-audience.")
        var audience = "simp"

        @Option(help: "The issuer (iss). Default: none.")
        var issuer: String?

        @Option(help: "Date the token back by this long (90s, 2h): iat and nbf, and so exp, move into the past. For tests.")
        var backdate = "0s"

        func run() async throws {
            guard let ttl = Self.seconds(ttl), ttl > 0 else { throw ValidationError("--ttl must be like 90s, 15m, 1h or 2d") }
            guard let backdate = Self.seconds(backdate) else { throw ValidationError("--backdate must be like 90s, 15m, 1h or 2d") }
            let privateJWK: String
            do { privateJWK = try String(contentsOfFile: key, encoding: .utf8) } catch {
                throw ValidationError("cannot read the key \(key): \(error.localizedDescription)")
            }
            let issued = Date().addingTimeInterval(-backdate)
            let claims = TokenMint.Claims(
                subject: user, audience: audience, issuer: issuer, issuedAt: issued, expires: issued.addingTimeInterval(ttl))
            print(try await TokenMint.issue(claims, privateJWK: privateJWK))
        }

        /// "90s", "15m", "1h", "2d" (or plain seconds) in seconds.
        static func seconds(_ text: String) -> Double? {
            let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
            if let unit = text.last, let factor = units[unit] { return Double(text.dropLast()).map { $0 * factor } }
            return Double(text)
        }
    }
}
