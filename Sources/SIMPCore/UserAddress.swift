import NIOCore

/// Textual form of UDP addresses as stored in Redis: `IPv4:port` or `[IPv6]:port`.
public enum AddressText {
    /// `address` as `ip:port` (`[ip]:port` for IPv6), or nil for non-IP addresses.
    public static func format(_ address: SocketAddress) -> String? {
        guard let ip = address.ipAddress, let port = address.port else { return nil }
        if case .v6 = address { return "[\(ip)]:\(port)" }
        return "\(ip):\(port)"
    }

    /// Parses what `format` writes.
    public static func parse(_ text: String) -> SocketAddress? {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (0...65535).contains(port)
        else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return try? SocketAddress(ipAddress: host, port: port)
    }

    /// Parses `host:port`, resolving nothing: `host` must be an IP literal or `localhost`.
    public static func parseHostPort(_ text: String) -> (host: String, port: Int)? {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (1...65535).contains(port)
        else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { return nil }
        return (host, port)
    }
}
