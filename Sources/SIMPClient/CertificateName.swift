import NIOCore
import NIOSSL

/// Whether a relay's certificate names the host a client connects to (docs/PROTOCOL.md §3.5):
/// a DNS name must be one of the certificate's DNS names (a `*` as the whole first label stands
/// for exactly one label), an IP address one of its IP addresses. Nothing else counts: not the
/// address the connection reached (swift-nio-ssl accepts an IP name of it even for a DNS name),
/// not the subject's common name.
struct CertificateName: Sendable {
    /// The names a certificate is valid for, as the user would write them.
    struct Names: Sendable, CustomStringConvertible {
        var dns: [String] = []
        var ip: [[UInt8]] = []

        init(_ certificate: NIOSSLCertificate) {
            for name in certificate._subjectAlternativeNames() {
                switch name.nameType {
                case .dnsName: dns.append(String(decoding: Array(name.contents), as: UTF8.self))
                case .ipAddress: ip.append(Array(name.contents))
                default: continue
                }
            }
        }

        var description: String {
            let all = dns.map { "DNS:\($0)" } + ip.map { "IP:\(CertificateName.text($0))" }
            return all.isEmpty ? "no subject alternative names" : all.joined(separator: ", ")
        }
    }

    /// The relay's certificate is not valid for the host of `--server`.
    struct Mismatch: Error, CustomStringConvertible {
        var host: String
        var names: String
        var description: String {
            let kind =
                CertificateName.ipBytes(host) == nil ? "a DNS name must be among its DNS names" : "an IP address must be among its IP addresses"
            return "the relay's certificate is not valid for \(host) (it names \(names); \(kind))"
        }
    }

    let host: String

    /// Throws `Mismatch` unless `certificate` names `host`.
    func check(_ certificate: NIOSSLCertificate) throws {
        let names = Names(certificate)
        guard matches(names) else { throw Mismatch(host: host, names: names.description) }
    }

    func matches(_ names: Names) -> Bool {
        if let address = Self.ipBytes(host) { return names.ip.contains(address) }
        let wanted = Self.labels(host)
        return names.dns.contains { Self.matches(pattern: Self.labels($0), name: wanted) }
    }

    /// `pattern` (a certificate's DNS name) matches `name` label by label, ignoring case; a
    /// first label `*` matches any one label if at least two labels follow it.
    static func matches(pattern: [Substring], name: [Substring]) -> Bool {
        guard pattern.count == name.count, !name.isEmpty, !name.contains(where: \.isEmpty) else { return false }
        return zip(pattern, name).enumerated().allSatisfy { index, pair in
            if index == 0, pair.0 == "*" { return pattern.count >= 3 }
            return pair.0.lowercased() == pair.1.lowercased()
        }
    }

    static func labels(_ name: String) -> [Substring] {
        let trimmed = name.hasSuffix(".") ? name.dropLast() : Substring(name)
        return trimmed.split(separator: ".", omittingEmptySubsequences: false)
    }

    /// The 4 or 16 bytes of an IP address literal; nil for a DNS name.
    static func ipBytes(_ host: String) -> [UInt8]? {
        guard let address = try? SocketAddress(ipAddress: host, port: 0) else { return nil }
        switch address {
        case .v4(let v4): return withUnsafeBytes(of: v4.address.sin_addr) { Array($0) }
        case .v6(let v6): return withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
        default: return nil
        }
    }

    static func text(_ bytes: [UInt8]) -> String {
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        return stride(from: 0, to: bytes.count, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
            .joined(separator: ":")
    }
}
