/// Key material that never shows in logs: `description`, `debugDescription` and reflection
/// (`dump`, string interpolation of an enclosing struct) print only its length.
public struct SecretBytes: Equatable, Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The key bytes themselves; read them only to compute with them or to persist them.
    public let bytes: [UInt8]

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public var description: String { "<redacted \(bytes.count) bytes>" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }

    /// Compares in time that depends only on the lengths.
    public static func == (lhs: SecretBytes, rhs: SecretBytes) -> Bool {
        guard lhs.bytes.count == rhs.bytes.count else { return false }
        return zip(lhs.bytes, rhs.bytes).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }
}

/// Types that hold secrets show no stored properties to `dump` and debuggers' mirrors: only
/// their (redacted) `description`.
public protocol RedactedReflection: CustomReflectable, CustomStringConvertible {}

extension RedactedReflection {
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
