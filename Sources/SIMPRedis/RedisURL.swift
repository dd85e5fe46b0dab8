import Foundation

/// Where a Redis server is and how to log in to it:
/// `redis[s]://[[USER]:PASSWORD@]HOST[:PORT][/DB][?ca=FILE&cert=FILE&key=FILE]`.
///
/// - `redis://` is plain TCP, `rediss://` is TLS (swift-nio-ssl). With TLS, `ca` names a PEM file
///   of trusted roots (default: the system's), `cert` and `key` a client certificate and its
///   private key (PEM) for servers that check clients (`tls-auth-clients yes`).
/// - A password alone (`redis://:secret@host`) logs in with `AUTH secret` (`requirepass`);
///   with a user (`redis://alice:secret@host`) with `AUTH alice secret` (an ACL user).
/// - Percent-escapes (`%40` for `@`) are decoded in the user and password.
///
/// `description` never shows the password: it prints `***` in its place, so a URL can go into
/// any log or error message.
public struct RedisURL: Hashable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var database: Int
    /// The ACL user for `AUTH user password`; nil logs in as `default` (or not at all).
    public var user: String?
    /// The password for `AUTH`; nil sends no AUTH.
    public var password: String?
    /// TLS settings; nil is plain TCP.
    public var tls: RedisTLS?

    public init(
        host: String, port: Int = 6379, database: Int = 0, user: String? = nil, password: String? = nil,
        tls: RedisTLS? = nil
    ) {
        self.host = host
        self.port = port
        self.database = database
        self.user = user
        self.password = password
        self.tls = tls
    }

    /// Parses a Redis URL; throws `RedisError` with a readable reason (without the password).
    public init(parsing text: String) throws {
        let shown = Self.redacted(text)
        let tlsScheme: Bool
        var rest: Substring
        if text.hasPrefix("redis://") {
            tlsScheme = false
            rest = Substring(text.dropFirst("redis://".count))
        } else if text.hasPrefix("rediss://") {
            tlsScheme = true
            rest = Substring(text.dropFirst("rediss://".count))
        } else {
            throw RedisError("Redis URL must look like redis://[USER:PASSWORD@]HOST:PORT[/DB] or rediss://…, got \"\(shown)\"")
        }
        var query: Substring = ""
        if let mark = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: mark)...]
            rest = rest[..<mark]
        }
        var user: String?
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let credentials = rest[..<at]
            rest = rest[rest.index(after: at)...]
            if let colon = credentials.firstIndex(of: ":") {
                let name = credentials[..<colon]
                user = name.isEmpty ? nil : try Self.decode(name, in: shown)
                password = try Self.decode(credentials[credentials.index(after: colon)...], in: shown)
            } else {
                // `redis://secret@host`: a single word is a password, as redis-cli reads it.
                password = try Self.decode(credentials, in: shown)
            }
        }
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let dbText = rest[rest.index(after: slash)...]
            guard dbText.isEmpty || Int(dbText) != nil, (Int(dbText) ?? 0) >= 0 else {
                throw RedisError("Redis database in \"\(shown)\" must be a number")
            }
            database = Int(dbText) ?? 0
            rest = rest[..<slash]
        }
        var port = 6379
        if let colon = rest.lastIndex(of: ":"), !rest.hasSuffix("]") {
            guard let parsed = Int(rest[rest.index(after: colon)...]), (1...65535).contains(parsed) else {
                throw RedisError("Redis port in \"\(shown)\" must be 1-65535")
            }
            port = parsed
            rest = rest[..<colon]
        }
        let host = rest.hasPrefix("[") && rest.hasSuffix("]") ? String(rest.dropFirst().dropLast()) : String(rest)
        guard !host.isEmpty, !host.contains("@"), !host.contains(":") || rest.hasPrefix("[") else {
            throw RedisError("Redis URL \"\(shown)\" has no valid host")
        }
        let tls = try Self.tlsOptions(query, scheme: tlsScheme, in: shown)
        self.init(host: host, port: port, database: database, user: user, password: password, tls: tls)
    }

    /// The URL with the password replaced by `***`.
    public var description: String {
        let hostText = host.contains(":") ? "[\(host)]" : host
        var login = ""
        if password != nil { login = "\(user ?? ""):***@" } else if let user { login = "\(user)@" }
        var text = "\(tls == nil ? "redis" : "rediss")://\(login)\(hostText):\(port)" + (database == 0 ? "" : "/\(database)")
        if let tls {
            let options = [("ca", tls.caFile), ("cert", tls.certificateFile), ("key", tls.keyFile)]
                .compactMap { name, value in value.map { "\(name)=\($0)" } }
            if !options.isEmpty { text += "?" + options.joined(separator: "&") }
        }
        return text
    }

    /// The URL as text *with* its password, to hand to a child process (`--redis`). Never log it.
    public var textWithPassword: String {
        guard let password else { return description }
        let escaped = password.utf8.map { byte -> String in
            let safe = (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7a) || "-._~".utf8.contains(byte)
            return safe ? String(UnicodeScalar(byte)) : "%" + String(byte, radix: 16, uppercase: true).leftPadded
        }.joined()
        return description.replacingFirst(":***@", with: ":\(escaped)@")
    }

    /// The same server as `host:port` (no scheme, no credentials), as Redis Cluster names nodes.
    public var address: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// The same login and TLS settings on another node (for Redis Cluster redirections).
    public func node(host: String, port: Int) -> RedisURL {
        var url = self
        url.host = host
        url.port = port
        url.database = 0
        return url
    }

    /// Any text with the password of a `redis[s]://` URL in it replaced by `***` (for messages
    /// about text that did not parse).
    public static func redacted(_ text: String) -> String {
        guard let scheme = text.range(of: "://"), let at = text[scheme.upperBound...].lastIndex(of: "@") else { return text }
        let credentials = text[scheme.upperBound..<at]
        guard let colon = credentials.firstIndex(of: ":") else { return text[..<scheme.upperBound] + "***" + text[at...] }
        return String(text[..<text.index(after: colon)]) + "***" + text[at...]
    }

    private static func decode(_ text: Substring, in shown: String) throws -> String {
        guard let decoded = String(text).removingPercentEncodingIfValid else {
            throw RedisError("bad %-escape in the user or password of \"\(shown)\"")
        }
        return decoded
    }

    private static func tlsOptions(_ query: Substring, scheme: Bool, in shown: String) throws -> RedisTLS? {
        var tls = RedisTLS()
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[1].isEmpty else { throw RedisError("bad option \"\(pair)\" in \"\(shown)\"") }
            switch parts[0] {
            case "ca": tls.caFile = parts[1]
            case "cert": tls.certificateFile = parts[1]
            case "key": tls.keyFile = parts[1]
            default: throw RedisError("unknown option \"\(parts[0])\" in \"\(shown)\" (known: ca, cert, key)")
            }
        }
        guard scheme else {
            guard query.isEmpty else { throw RedisError("TLS options need a rediss:// URL, got \"\(shown)\"") }
            return nil
        }
        guard (tls.certificateFile == nil) == (tls.keyFile == nil) else {
            throw RedisError("a client certificate needs both cert= and key= in \"\(shown)\"")
        }
        return tls
    }
}

/// TLS settings of a `rediss://` URL (files in PEM).
public struct RedisTLS: Hashable, Sendable {
    /// Trusted roots; nil trusts the system's.
    public var caFile: String?
    /// Client certificate (chain) shown to the server; needs `keyFile`.
    public var certificateFile: String?
    /// The client certificate's private key.
    public var keyFile: String?

    public init(caFile: String? = nil, certificateFile: String? = nil, keyFile: String? = nil) {
        self.caFile = caFile
        self.certificateFile = certificateFile
        self.keyFile = keyFile
    }
}

extension String {
    fileprivate var leftPadded: String { count == 1 ? "0" + self : self }

    func replacingFirst(_ target: String, with replacement: String) -> String {
        guard let range = firstRange(of: target) else { return self }
        return String(self[..<range.lowerBound]) + replacement + self[range.upperBound...]
    }

    /// Decodes `%XX` escapes; nil when an escape is malformed. (Foundation-free, so the URL
    /// parser has no Foundation dependency.)
    fileprivate var removingPercentEncodingIfValid: String? {
        var bytes: [UInt8] = []
        var iterator = utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else { bytes.append(byte); continue }
            guard let high = iterator.next().flatMap(Self.hexValue), let low = iterator.next().flatMap(Self.hexValue) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
