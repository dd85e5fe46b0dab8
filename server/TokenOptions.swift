import ArgumentParser
import SIMPCore
import SIMPRelay

/// The relay's access-token options (docs/OPERATIONS.md, "Access tokens"), listed with the
/// other options.
struct TokenOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "JWKS file with the public keys whose access tokens (JWT, EdDSA or ES256) log users in.",
            discussion:
                "Read at start, and again on SIGHUP or when the file changes (keys added or removed take effect without a restart).",
            valueName: "path"))
    var jwks: String?

    @Option(name: .customLong("token-audience"), help: "The audience (aud) every access token must name.")
    var tokenAudience = "simp"

    @Option(name: .customLong("token-issuer"), help: "The issuer (iss) every access token must carry. Default: any.")
    var tokenIssuer: String?

    @Option(name: .customLong("token-leeway"), help: "Seconds a token's exp and nbf may be off, for clocks that differ.")
    var tokenLeeway = Double(AccessTokenPolicy.defaultLeewayMillis) / 1000

    @Flag(
        name: .customLong("allow-token-without-tls"),
        help: "Take access tokens over plain TCP from addresses other than loopback (anyone on the path can then replay them).")
    var allowTokenWithoutTLS = false

    @Flag(
        name: .customLong("no-password-login"), help: "Log users in with access tokens only, never with passwords; the relay then needs a JWKS file.")
    var noPasswordLogin = false

    func validate() throws {
        guard !tokenAudience.isEmpty else { throw ValidationError("--token-audience must not be empty") }
        guard tokenLeeway >= 0 else { throw ValidationError("--token-leeway must not be negative") }
    }

    /// Why the relay cannot start with these options (checked at start, so `--print-config`
    /// shows each option alone), nil if it can.
    var problem: String? {
        jwks == nil && noPasswordLogin ? "--no-password-login needs --jwks: nobody could log in" : nil
    }

    /// The relay's settings, nil without --jwks.
    var settings: AccessTokenSettings? {
        guard let jwks else { return nil }
        var settings = AccessTokenSettings(jwksPath: jwks, audience: tokenAudience, issuer: tokenIssuer)
        settings.leewayMillis = Int64((tokenLeeway * 1000).rounded())
        settings.allowWithoutTLS = allowTokenWithoutTLS
        return settings
    }
}
