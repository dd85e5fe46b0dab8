import ArgumentParser
import Foundation
import SIMPRelay

extension UserCommand {
    /// `simp-server user deny-tokens USER --before TIME`: revokes a user's access tokens.
    struct DenyTokens: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "deny-tokens",
            abstract: "Refuse USER's access tokens issued before a time (at login and at refresh).",
            discussion: """
                Every relay of this Redis refuses such a token from now on ("the relay's operator revoked \
                tokens issued before it"). A session already open runs until its token expires unless it \
                is renewed; end it now with `simp-server sessions end USER`. The user need not have a password.
                """)

        @Argument(help: "The user id (the tokens' sub).")
        var user: String

        @Option(help: "now, an ISO 8601 time (2026-11-29T10:00:00Z), or milliseconds since the epoch.")
        var before = "now"

        @OptionGroup var options: RedisOption

        func run() async throws {
            guard let millis = Self.millis(before) else { throw ValidationError("--before must be now, an ISO 8601 time or ms since the epoch") }
            try await options.withStore { store in
                try await store.denyTokens(of: user, issuedBefore: millis)
                let when = ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double(millis) / 1000))
                print("access tokens of \(user) issued before \(when) are refused by the relays of \(options.shown)")
            }
        }

        static func millis(_ text: String) -> Int64? {
            if text == "now" { return Int64(Date().timeIntervalSince1970 * 1000) }
            if let millis = Int64(text) { return millis }
            return ISO8601DateFormatter().date(from: text).map { Int64($0.timeIntervalSince1970 * 1000) }
        }
    }
}
