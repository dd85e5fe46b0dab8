import NIOCore
import NIOSSL

/// The relay's certificate chain and private key for TLS on the control channel
/// (`simp-server --tls-cert FILE --tls-key FILE`), PEM files.
public struct ControlTLSFiles: Sendable, Equatable {
    /// The relay's certificate, then any intermediate certificates.
    public var certificatePath: String
    public var keyPath: String

    public init(certificatePath: String, keyPath: String) {
        self.certificatePath = certificatePath
        self.keyPath = keyPath
    }
}

/// TLS on the relay's control channel (docs/PROTOCOL.md §1.2): the server context, built once
/// at start, and what the relay says when it runs without TLS.
enum ControlTLS {
    /// Reads the files and builds the context every connection shares (TLS 1.2 or later).
    /// Throws `RelayStartError` naming the file at fault.
    static func serverContext(_ files: ControlTLSFiles) throws -> NIOSSLContext {
        let chain: [NIOSSLCertificate]
        do { chain = try NIOSSLCertificate.fromPEMFile(files.certificatePath) } catch {
            throw RelayStartError("cannot read the TLS certificate \(files.certificatePath) (a PEM file is needed): \(error)")
        }
        guard !chain.isEmpty else { throw RelayStartError("no certificate in \(files.certificatePath)") }
        let key: NIOSSLPrivateKey
        do { key = try NIOSSLPrivateKey(file: files.keyPath, format: .pem) } catch {
            throw RelayStartError("cannot read the TLS private key \(files.keyPath) (a PEM file is needed): \(error)")
        }
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        configuration.minimumTLSVersion = .tlsv12
        do { return try NIOSSLContext(configuration: configuration) } catch {
            throw RelayStartError("the TLS certificate \(files.certificatePath) and key \(files.keyPath) do not go together: \(error)")
        }
    }

    /// The warning a relay without TLS logs once at start.
    static func plaintextWarning(host: String) -> String {
        let local = ["127.0.0.1", "::1", "localhost"].contains(host) || host.hasPrefix("127.")
        return "CONTROL CHANNEL WITHOUT TLS (no --tls-cert/--tls-key): logins, receipts, room names and presence cross the network in clear"
            + (local
                ? "; fine on loopback for development only."
                : " on \(host): anyone on the path can record a login, and with a read of the Redis (simp:cred) log in as that user"
                    + " until the password changes (docs/PROTOCOL.md §4.2). Never run it like this in production: give --tls-cert and --tls-key.")
    }
}
