/// A Redis failure: connection trouble or an error reply.
public struct RedisError: Error, Equatable, Sendable, CustomStringConvertible {
    public let message: String
    /// Redis could not be used at all (unreachable, connection lost, no reply, backing off) as
    /// opposed to a failed command. The client already logs such an outage once when it starts
    /// and once when it ends, so callers may log these quietly.
    public let unavailable: Bool

    public init(_ message: String, unavailable: Bool = false) {
        self.message = message
        self.unavailable = unavailable
    }
    public var description: String { message }
}

/// One Redis reply.
public indirect enum RedisValue: Equatable, Sendable {
    case null
    case string(String)
    /// A bulk string that is not valid UTF-8 (binary data such as a sealed file chunk), as its bytes.
    case bytes([UInt8])
    case integer(Int64)
    case status(String)
    case error(String)
    case array([RedisValue])

    /// The reply as text, for string and status replies.
    public var string: String? {
        switch self {
        case .string(let s), .status(let s): return s
        case .bytes(let bytes): return String(decoding: bytes, as: UTF8.self)
        default: return nil
        }
    }

    /// The reply's exact bytes, for bulk string replies (binary-safe).
    public var bytes: [UInt8]? {
        switch self {
        case .string(let s): return Array(s.utf8)
        case .bytes(let bytes): return bytes
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

    /// The message of an error reply.
    public var errorMessage: String? {
        if case .error(let message) = self { return message }
        return nil
    }
}
