import Foundation

/// A throwaway certificate authority and a relay certificate it signed, made with the openssl
/// command in a temporary folder, for TLS tests. The relay certificate is valid for one day,
/// by default for `localhost` and `127.0.0.1`.
public struct TestCertificates: Sendable {
    public let folder: URL
    /// The CA's certificate (what clients trust with --ca).
    public var caFile: String { folder.appendingPathComponent("ca.pem").path }
    /// The relay's certificate and key (simp-server --tls-cert, --tls-key).
    public var certificateFile: String { folder.appendingPathComponent("relay.pem").path }
    public var keyFile: String { folder.appendingPathComponent("relay.key").path }

    /// A new CA and relay certificate; `name` tells apart several sets in one test, and
    /// `subjectAltName` (openssl's syntax) says which names and addresses the certificate is valid for.
    public static func make(name: String = "test", subjectAltName: String = "DNS:localhost,IP:127.0.0.1") throws -> TestCertificates {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("simp-tls-\(name)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let certificates = TestCertificates(folder: folder)
        let p256 = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        _ = FileManager.default.createFile(
            atPath: folder.appendingPathComponent("relay.ext").path,
            contents: Data("subjectAltName=\(subjectAltName)\nextendedKeyUsage=serverAuth\n".utf8))
        try openssl(["req", "-x509"] + p256 + ["-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=SIMP test CA \(name)"], in: folder)
        try openssl(["req"] + p256 + ["-keyout", "relay.key", "-out", "relay.csr", "-subj", "/CN=localhost"], in: folder)
        try openssl(["x509", "-req", "-in", "relay.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                     "-out", "relay.pem", "-days", "1", "-extfile", "relay.ext"], in: folder)
        return certificates
    }

    /// Deletes the folder.
    public func remove() {
        try? FileManager.default.removeItem(at: folder)
    }

    private static func openssl(_ arguments: [String], in folder: URL) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        process.currentDirectoryURL = folder
        process.standardOutput = FileHandle.nullDevice
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        let output = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CertificateError("openssl \(arguments.joined(separator: " ")) failed: \(String(decoding: output, as: UTF8.self))")
        }
    }

    struct CertificateError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
