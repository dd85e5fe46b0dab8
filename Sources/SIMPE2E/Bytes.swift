/// Big-endian writer for the encodings in docs/E2E.md (and the client's store entries).
package struct ByteWriter {
    package private(set) var bytes: [UInt8] = []

    package init() {}

    package mutating func u8(_ value: UInt8) { bytes.append(value) }
    package mutating func u16(_ value: UInt16) { appendBigEndian(UInt64(value), width: 2) }
    package mutating func u32(_ value: UInt32) { appendBigEndian(UInt64(value), width: 4) }
    package mutating func u64(_ value: UInt64) { appendBigEndian(value, width: 8) }
    package mutating func raw(_ value: [UInt8]) { bytes += value }

    /// A byte string of at most 65,535 bytes, preceded by its length as a u16.
    package mutating func lengthPrefixed(_ value: [UInt8]) {
        precondition(value.count <= Int(UInt16.max), "length-prefixed field longer than 65,535 bytes")
        u16(UInt16(value.count))
        raw(value)
    }

    private mutating func appendBigEndian(_ value: UInt64, width: Int) {
        for shift in stride(from: (width - 1) * 8, through: 0, by: -8) {
            bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
        }
    }
}

/// Big-endian reader that throws `E2EError.malformed` instead of reading past the end.
package struct ByteReader {
    private let bytes: [UInt8]
    package private(set) var offset = 0
    /// What is being read, named in the error when the input is short or long.
    private let what: String

    package init(_ bytes: [UInt8], reading what: String) {
        self.bytes = bytes
        self.what = what
    }

    package var remainingCount: Int { bytes.count - offset }

    package mutating func u8() throws -> UInt8 { try raw(1)[0] }
    package mutating func u16() throws -> UInt16 { UInt16(try bigEndian(2)) }
    package mutating func u32() throws -> UInt32 { UInt32(try bigEndian(4)) }
    package mutating func u64() throws -> UInt64 { try bigEndian(8) }
    package mutating func key() throws -> [UInt8] { try raw(32) }
    package mutating func lengthPrefixed() throws -> [UInt8] { try raw(Int(try u16())) }

    /// A length-prefixed name that must be valid UTF-8 (so each name has one encoding).
    package mutating func lengthPrefixedUTF8() throws -> String {
        guard let name = String(validating: try lengthPrefixed(), as: UTF8.self) else {
            throw E2EError.malformed("\(what): a name that is not UTF-8 at offset \(offset)")
        }
        return name
    }

    package mutating func raw(_ count: Int) throws -> [UInt8] {
        guard count >= 0, count <= remainingCount else {
            throw E2EError.malformed("\(what): needs \(count) more bytes at offset \(offset), has \(remainingCount)")
        }
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    /// The bytes not read yet, consuming them.
    package mutating func rest() -> [UInt8] {
        defer { offset = bytes.count }
        return Array(bytes[offset...])
    }

    /// Throws unless every byte was read.
    package func expectEnd() throws {
        guard remainingCount == 0 else {
            throw E2EError.malformed("\(what): \(remainingCount) unexpected bytes after offset \(offset)")
        }
    }

    private mutating func bigEndian(_ width: Int) throws -> UInt64 {
        try raw(width).reduce(0) { $0 << 8 | UInt64($1) }
    }
}

/// Reads a version byte and throws unless it is the one this code speaks.
extension ByteReader {
    package mutating func expectVersion(_ expected: UInt8) throws {
        let version = try u8()
        guard version == expected else { throw E2EError.unsupportedVersion(version) }
    }
}
