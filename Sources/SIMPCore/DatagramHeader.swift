import CProtobufC
import CSIMPProto
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

    /// The wire type of every field of `simp.Message`, read from the protobuf-c descriptor so
    /// the fast path always knows the same schema as the full decoder.
    enum KnownFields {
        static let unknown: Int8 = -1
        /// Enum fields the fast path does not validate.
        static let enumeration: Int8 = -2
        /// Indexed by field number.
        static let wireTypes: [Int8] = {
            let descriptor = simp__message__descriptor
            let fields = UnsafeBufferPointer(start: descriptor.fields, count: Int(descriptor.n_fields))
            var table = [Int8](repeating: unknown, count: Int(fields.map(\.id).max() ?? 0) + 1)
            for field in fields { table[Int(field.id)] = wireType(of: field.type) }
            return table
        }()

        private static func wireType(of type: ProtobufCType) -> Int8 {
            switch type {
            case PROTOBUF_C_TYPE_ENUM: return enumeration
            case PROTOBUF_C_TYPE_INT32, PROTOBUF_C_TYPE_SINT32, PROTOBUF_C_TYPE_INT64, PROTOBUF_C_TYPE_SINT64,
                 PROTOBUF_C_TYPE_UINT32, PROTOBUF_C_TYPE_UINT64, PROTOBUF_C_TYPE_BOOL: return 0
            case PROTOBUF_C_TYPE_FIXED64, PROTOBUF_C_TYPE_SFIXED64, PROTOBUF_C_TYPE_DOUBLE: return 1
            case PROTOBUF_C_TYPE_STRING, PROTOBUF_C_TYPE_BYTES, PROTOBUF_C_TYPE_MESSAGE: return 2
            default: return 5 // FIXED32, SFIXED32, FLOAT
            }
        }
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
            case (_, _) where field < KnownFields.wireTypes.count && KnownFields.wireTypes[Int(field)] != KnownFields.unknown:
                // Another field of the schema: skipped if its wire type is right; enums other than
                // `type` (the full decoder validates their values) and wrong wire types are left
                // to the full decoder.
                guard KnownFields.wireTypes[Int(field)] == Int8(wireType) else { return nil }
                guard reader.skip(wireType: wireType) else { return nil }
            default: // a field this schema does not have: skipped by wire type; groups are left to the full decoder
                guard reader.skip(wireType: wireType) else { return nil }
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
        /// Skips one field value of `wireType` (0, 1, 2 or 5).
        mutating func skip(wireType: UInt64) -> Bool {
            switch wireType {
            case 0: return varint() != nil
            case 1: return skip(8)
            case 2: return lengthDelimited() != nil
            case 5: return skip(4)
            default: return false
            }
        }

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
