import NIOCore
import NIOSSL
import SIMPCore

/// TLS on the control channel to the relay (docs/PROTOCOL.md §3.5). The relay's certificate is
/// checked against `caFile`, or the system's trust store, and must name the host the client
/// connects to (the HOST of `--server`: a DNS name, also sent as SNI, among its DNS names; an
/// IP address among its IP addresses), as `CertificateName` checks.
public struct ClientTLS: Sendable, Equatable {
    /// PEM file of the certificate authorities to trust instead of the system's.
    public var caFile: String?

    public init(caFile: String? = nil) {
        self.caFile = caFile
    }

    /// The context every connection of a client shares. Throws `SIMPClientError.cannotConnect`
    /// naming the CA file when it cannot be read.
    func makeContext() throws -> NIOSSLContext {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv12
        // The chain is verified by swift-nio-ssl; the name by `CertificateName` (swift-nio-ssl
        // would also accept a DNS name whose address is among the certificate's IP addresses).
        configuration.certificateVerification = .noHostnameVerification
        if let caFile {
            do {
                let roots = try NIOSSLCertificate.fromPEMFile(caFile)
                guard !roots.isEmpty else { throw SIMPClientError.cannotConnect("no certificate in --ca \(caFile)") }
                configuration.trustRoots = .certificates(roots)
            } catch let error as SIMPClientError {
                throw error
            } catch {
                throw SIMPClientError.cannotConnect("cannot read the CA file \(caFile) (a PEM file is needed): \(error)")
            }
        }
        do { return try NIOSSLContext(configuration: configuration) } catch {
            throw SIMPClientError.cannotConnect("cannot set up TLS: \(error)")
        }
    }

    /// The TLS handler for a connection to `host`: a DNS name is sent as SNI (an IP address
    /// never is); once the chain is verified, the certificate must name `host`, else the
    /// handshake fails with `CertificateName.Mismatch` before any frame is sent.
    static func handler(_ context: NIOSSLContext, host: String) throws -> NIOSSLClientHandler {
        let name = CertificateName(host: host)
        return try NIOSSLClientHandler._makeSSLClientHandler(
            context: context, serverHostname: isIPAddress(host) ? nil : host,
            additionalPeerCertificateVerificationCallback: { certificate, channel in
                channel.eventLoop.makeCompletedFuture { try name.check(certificate) }
            })
    }

    /// What `error` says of the TLS handshake, for the core to classify and word
    /// (`ConnectionLifecycle.tlsFailed`); nil when it is not the handshake failing (the chain,
    /// the name, or the protocol).
    static func failure(_ error: Error) -> ConnectionLifecycle.TLSFailure? {
        if let mismatch = error as? CertificateName.Mismatch { return .nameMismatch(detail: "\(mismatch)") }
        guard error is NIOSSLError || error is NIOSSLExtraError || error is BoringSSLError else { return nil }
        return .handshake(error: "\(error)")
    }

    static func isIPAddress(_ host: String) -> Bool {
        (try? SocketAddress(ipAddress: host, port: 0)) != nil
    }
}
