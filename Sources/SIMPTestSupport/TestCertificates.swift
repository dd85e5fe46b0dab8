import Foundation
import SIMPRedis

/// A throwaway certificate authority made with the openssl CLI, a server certificate (by
/// default for 127.0.0.1 and localhost) and a client certificate, all signed by it (PEM files,
/// valid one day), for the TLS tests of Redis connections and of the relay's control channel.
public struct TestCertificates: Sendable {
    /// The temporary directory holding the PEM files.
    public let directory: URL
    /// The certificate authority's certificate.
    public var caFile: String { path("ca.crt") }
    /// The server certificate.
    public var serverCertificate: String { path("server.crt") }
    /// The server certificate's private key.
    public var serverKey: String { path("server.key") }
    /// The client certificate.
    public var clientCertificate: String { path("client.crt") }
    /// The client certificate's private key.
    public var clientKey: String { path("client.key") }
    /// The relay's certificate and key (simp-server --tls-cert, --tls-key): the server's.
    public var certificateFile: String { serverCertificate }
    /// The relay's key (`--tls-key`): the server certificate's.
    public var keyFile: String { serverKey }

    /// Makes a new CA and its two certificates in a temporary directory; `name` tells apart
    /// several sets in one test, `subjectAltName` (openssl's syntax) says which names and
    /// addresses the server certificate is valid for.
    public static func make(name: String = "test", subjectAltName: String = "IP:127.0.0.1,DNS:localhost") async throws -> TestCertificates {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-tls-\(name)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try await ToolProcess.run(
            "openssl",
            ["req", "-x509"] + key + [
                "-keyout", "ca.key", "-out", "ca.crt", "-days", "1",
                "-subj", "/CN=SIMP test CA \(name)",
            ], in: directory)
        try "subjectAltName=\(subjectAltName)\nextendedKeyUsage=serverAuth\n".write(
            to: directory.appendingPathComponent("server.ext"), atomically: true, encoding: .utf8)
        try "extendedKeyUsage=clientAuth\n".write(to: directory.appendingPathComponent("client.ext"), atomically: true, encoding: .utf8)
        for name in ["server", "client"] {
            try await ToolProcess.run(
                "openssl",
                ["req"] + key + [
                    "-keyout", "\(name).key", "-out", "\(name).csr",
                    "-subj", "/CN=simp-\(name)",
                ], in: directory)
            try await ToolProcess.run(
                "openssl",
                [
                    "x509", "-req", "-in", "\(name).csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                    "-CAcreateserial", "-out", "\(name).crt", "-days", "1", "-extfile", "\(name).ext",
                ],
                in: directory)
        }
        return TestCertificates(directory: directory)
    }

    /// `redis-server` options for a TLS-only server on `port` that checks client certificates
    /// when `requireClientCertificate`.
    public func redisServerArguments(port: Int, requireClientCertificate: Bool) -> [String] {
        [
            "--port", "0", "--tls-port", String(port), "--tls-cert-file", serverCertificate, "--tls-key-file", serverKey,
            "--tls-ca-cert-file", caFile, "--tls-auth-clients", requireClientCertificate ? "yes" : "no",
        ]
    }

    /// Deletes the files.
    public func remove() { try? FileManager.default.removeItem(at: directory) }

    private func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
}
