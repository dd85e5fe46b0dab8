import NIOCore
import NIOSSL

/// TLS on the control channel to the relay (docs/PROTOCOL.md §1.2). The relay's certificate is
/// checked against `caFile`, or the system's trust store, and must name the host the client
/// connects to (the HOST of `--server`: a DNS name, also sent as SNI, or an IP address).
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

    /// The TLS handler for a connection to `host`: the name is verified and sent as SNI; an IP
    /// address is verified against the certificate's IP addresses (and never sent as SNI).
    static func handler(_ context: NIOSSLContext, host: String) throws -> NIOSSLClientHandler {
        try NIOSSLClientHandler(context: context, serverHostname: isIPAddress(host) ? nil : host)
    }

    /// Why a TLS connection to `server` failed, for the user.
    func failure(_ error: Error, server: RelayEndpoint) -> SIMPClientError {
        let trusted = caFile.map { "the CA in \($0)" } ?? "the system's trusted CAs"
        return .cannotConnect("TLS with \(server) failed: the relay's certificate is not valid for \(server.host) or not signed by \(trusted), "
            + "or the relay does not speak TLS (\(error))")
    }

    /// Whether `host` names this machine: there a relay without TLS is development, elsewhere a risk.
    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    static func isIPAddress(_ host: String) -> Bool {
        (try? SocketAddress(ipAddress: host, port: 0)) != nil
    }
}
