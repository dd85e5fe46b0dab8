import Dispatch
import Foundation
import Logging
import NIOConcurrencyHelpers
import SIMPCore
import SIMPTokens

/// What the operator set for access-token logins (`--jwks`, `--token-audience`,
/// `--token-issuer`, `--token-leeway`, `--allow-token-without-tls`; docs/OPERATIONS.md).
public struct AccessTokenSettings: Sendable {
    /// The JWKS file with the public keys that sign tokens.
    public var jwksPath: String
    /// The `aud` every token must name.
    public var audience: String
    /// The `iss` every token must carry, if set.
    public var issuer: String?
    /// How far `exp` and `nbf` may be off (ms).
    public var leewayMillis: Int64 = AccessTokenPolicy.defaultLeewayMillis
    /// Take tokens over plain TCP from addresses other than loopback.
    public var allowWithoutTLS = false
    /// How often the file's modification time is looked at.
    public var pollInterval: Duration = .seconds(1)

    public init(jwksPath: String, audience: String, issuer: String? = nil) {
        self.jwksPath = jwksPath
        self.audience = audience
        self.issuer = issuer
    }
}

/// The relay's shell around the JWKS file: reads it at start (a relay whose file is unreadable
/// does not start), and again on SIGHUP or when the file changes (its modification time, size
/// or inode), handing each new verifier to `install`. A file that became unreadable keeps the
/// keys read before, and the relay says why in its log.
final class AccessTokenKeys: Sendable {
    private let settings: AccessTokenSettings
    private let logger: Logger

    init(settings: AccessTokenSettings, logger: Logger) {
        self.settings = settings
        self.logger = logger
    }

    /// Reads the file now.
    func load() async throws -> JWKSVerifier {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: settings.jwksPath)) } catch {
            throw RelayStartError("cannot read the JWKS file \(settings.jwksPath): \(error.localizedDescription)")
        }
        do { return try await JWKSVerifier.load(jwks: data) } catch {
            throw RelayStartError("the JWKS file \(settings.jwksPath) is unusable: \(error)")
        }
    }

    /// Watches the file until the task is cancelled, calling `install` with each new key set.
    func watch(install: @escaping @Sendable (JWKSVerifier) -> Void) async {
        let hangups = Self.hangups()
        defer { hangups.source.cancel() }
        var seen = stamp()
        while !Task.isCancelled {
            try? await Task.sleep(for: settings.pollInterval)
            let now = stamp()
            let hungUp = hangups.take()
            guard now != seen || hungUp else { continue }
            seen = now
            do {
                let verifier = try await load()
                install(verifier)
                logger.notice(
                    "access token keys reloaded",
                    metadata: [
                        "jwks": "\(settings.jwksPath)", "keys": "\(verifier.keyIds.joined(separator: ","))",
                        "why": "\(hungUp ? "SIGHUP" : "file changed")",
                    ])
            } catch {
                logger.error("access token keys not reloaded, the previous ones stay", metadata: ["error": "\(error)"])
            }
        }
    }

    /// The file's modification time, size and inode (nil: unreadable).
    private func stamp() -> [Int]? {
        var info = stat()
        guard stat(settings.jwksPath, &info) == 0 else { return nil }
        return [Int(info.st_mtim.tv_sec), Int(info.st_mtim.tv_nsec), Int(info.st_size), Int(info.st_ino)]
    }

    /// SIGHUPs counted by a dispatch source (the default action, ending the process, is off).
    private static func hangups() -> (source: any DispatchSourceSignal, take: @Sendable () -> Bool) {
        signal(SIGHUP, SIG_IGN)
        let pending = NIOLockedValueBox(false)
        let source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global())
        source.setEventHandler { pending.withLockedValue { $0 = true } }
        source.resume()
        return (
            source,
            {
                pending.withLockedValue { hungUp in
                    defer { hungUp = false }; return hungUp
                }
            }
        )
    }
}
