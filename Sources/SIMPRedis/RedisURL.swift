/// Where a Redis server is: `redis://HOST[:PORT][/DB]`.
public struct RedisURL: Equatable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var database: Int

    public init(host: String, port: Int = 6379, database: Int = 0) {
        self.host = host
        self.port = port
        self.database = database
    }

    /// Parses `redis://HOST[:PORT][/DB]`; throws `RedisError` with a readable reason.
    public init(parsing text: String) throws {
        guard text.hasPrefix("redis://") else {
            throw RedisError("Redis URL must look like redis://HOST:PORT[/DB], got \"\(text)\"")
        }
        var rest = Substring(text.dropFirst("redis://".count))
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let dbText = rest[rest.index(after: slash)...]
            guard dbText.isEmpty || Int(dbText) != nil, (Int(dbText) ?? 0) >= 0 else {
                throw RedisError("Redis database in \"\(text)\" must be a number")
            }
            database = Int(dbText) ?? 0
            rest = rest[..<slash]
        }
        var port = 6379
        if let colon = rest.lastIndex(of: ":"), !rest.hasSuffix("]") {
            guard let parsed = Int(rest[rest.index(after: colon)...]), (1...65535).contains(parsed) else {
                throw RedisError("Redis port in \"\(text)\" must be 1-65535")
            }
            port = parsed
            rest = rest[..<colon]
        }
        let host = rest.hasPrefix("[") && rest.hasSuffix("]") ? String(rest.dropFirst().dropLast()) : String(rest)
        guard !host.isEmpty else { throw RedisError("Redis URL \"\(text)\" has no host") }
        self.init(host: host, port: port, database: database)
    }

    public var description: String {
        let hostText = host.contains(":") ? "[\(host)]" : host
        return "redis://\(hostText):\(port)" + (database == 0 ? "" : "/\(database)")
    }
}

/// A Redis failure: connection trouble or an error reply.
public struct RedisError: Error, Equatable, Sendable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// One Redis reply.
public indirect enum RedisValue: Equatable, Sendable {
    case null
    case string(String)
    case integer(Int64)
    case status(String)
    case error(String)
    case array([RedisValue])

    /// The reply as text, for string and status replies.
    public var string: String? {
        switch self {
        case .string(let s), .status(let s): return s
        default: return nil
        }
    }

    /// The reply as an integer, for integer replies.
    public var integer: Int64? {
        if case .integer(let value) = self { return value }
        return nil
    }

    /// The elements of an array reply.
    public var array: [RedisValue]? {
        if case .array(let values) = self { return values }
        return nil
    }
}
