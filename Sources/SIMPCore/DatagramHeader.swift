import NIOCore

/// The fields the relay needs to route a datagram, read straight from its protobuf bytes.
///
/// `parse` is a fast path for the relay's datagram loop: it reads `version`, `messageId`,
/// `type`, `fromUser` and `toUser`, skips everything else without copying, and gives up
/// (returns nil) on anything it does not handle exactly as `MessageCodec.decode` does: wire
/// types that do not match the field, groups, over-long varints, truncation, NUL bytes in the
/// user ids, or an `errorCode`. The caller then decodes the datagram in full, so the relay's
/// decisions never depend on which path read the bytes.
public struct DatagramHeader: Equatable, Sendable {
    public var version: UInt32 = 0
    public var messageId: UInt64 = 0
    public var kind: SIMPMessage.Kind = .text
    public var fromUser: String = ""
    public var toUser: String = ""

    public init(version: UInt32 = 0, messageId: UInt64 = 0, kind: SIMPMessage.Kind = .text, fromUser: String = "", toUser: String = "") {
        self.version = version
        self.messageId = messageId
        self.kind = kind
        self.fromUser = fromUser
        self.toUser = toUser
    }

    /// The header of a decoded message.
    public init(_ message: SIMPMessage) {
        self.init(version: message.version, messageId: message.messageId, kind: message.kind,
                  fromUser: message.fromUser, toUser: message.toUser)
    }

    /// Reads the header of the readable bytes of `buffer`, or nil if the full decoder must decide.
    public static func parse(_ buffer: ByteBuffer) -> DatagramHeader? {
        buffer.withUnsafeReadableBytes { parse(UnsafeRawBufferPointer($0)) }
    }

    /// Reads the header of a complete protobuf-encoded message, or nil if the full decoder must decide.
    public static func parse(_ bytes: UnsafeRawBufferPointer) -> DatagramHeader? {
        var reader = Reader(bytes: bytes)
        var header = DatagramHeader()
        var from: Range<Int>?, to: Range<Int>?
        while !reader.atEnd {
            let keyStart = reader.offset
            guard let key = reader.varint(), reader.offset - keyStart <= 5,
                  key >> 3 > 0, key >> 3 <= UInt64(UInt32.max >> 3) else { return nil }
            let field = key >> 3, wireType = key & 7
            switch (field, wireType) {
            case (1, 0):
                guard let value = reader.varint(), let version = UInt32(exactly: value) else { return nil }
                header.version = version
            case (2, 0):
                guard let value = reader.varint() else { return nil }
                header.messageId = value
            case (8, 0):
                guard let value = reader.varint(), let raw = Int32(exactly: value),
                      let kind = SIMPMessage.Kind(rawValue: raw) else { return nil }
                header.kind = kind
            case (6, 2):
                guard let range = reader.lengthDelimited() else { return nil }
                from = range
            case (7, 2):
                guard let range = reader.lengthDelimited() else { return nil }
                to = range
            case (3, 0), (10, 0), (11, 0), (14, 0):
                guard reader.varint() != nil else { return nil }
            case (4, 2), (5, 2), (13, 2), (15, 2):
                guard reader.lengthDelimited() != nil else { return nil }
            case (9, 5):
                guard reader.skip(4) else { return nil }
            case (1...15, _), (30...44, _):
                // A known field with the wrong wire type, errorCode, or an inbox/room/presence field
                // (30-44, never in a client's content datagram): the full decoder validates it.
                return nil
            case (_, 0):
                guard reader.varint() != nil else { return nil }
            case (_, 1):
                guard reader.skip(8) else { return nil }
            case (_, 2):
                guard reader.lengthDelimited() != nil else { return nil }
            case (_, 5):
                guard reader.skip(4) else { return nil }
            default:
                return nil // groups and invalid wire types
            }
        }
        guard let fromUser = from.map({ reader.string($0) }) ?? "", let toUser = to.map({ reader.string($0) }) ?? "" else {
            return nil
        }
        header.fromUser = fromUser
        header.toUser = toUser
        return header
    }

    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        var offset = 0

        var atEnd: Bool { offset >= bytes.count }

        /// A base-128 varint of at most 10 bytes.
        mutating func varint() -> UInt64? {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while offset < bytes.count, shift < 64 {
                let byte = bytes[offset]
                offset += 1
                if shift == 63, byte > 1 { return nil }
                value |= UInt64(byte & 0x7f) << shift
                if byte & 0x80 == 0 { return value }
                shift += 7
            }
            return nil
        }

        mutating func skip(_ count: Int) -> Bool {
            guard bytes.count - offset >= count else { return false }
            offset += count
            return true
        }

        /// The byte range of a length-delimited field's payload.
        mutating func lengthDelimited() -> Range<Int>? {
            guard let length = varint(), length <= UInt64(bytes.count - offset) else { return nil }
            let start = offset
            offset += Int(length)
            return start..<offset
        }

        /// The UTF-8 text in `range`, or nil if it holds a NUL (which the C decoder would cut at).
        func string(_ range: Range<Int>) -> String? {
            let slice = UnsafeRawBufferPointer(rebasing: bytes[range])
            guard !slice.contains(0) else { return nil }
            return String(decoding: slice, as: UTF8.self)
        }
    }
}
