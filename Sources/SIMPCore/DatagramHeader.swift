import CProtobufC
import CSIMPProto
import NIOCore

/// The fields the relay needs to route a datagram, read straight from its protobuf bytes.
///
/// `parse` is a fast path for the relay's datagram loop: it reads `version`, `messageId`,
/// `type`, `fromUser` and `toUser`, skips everything else without copying, and gives up
/// (returns nil) on anything it does not handle exactly as `MessageCodec.decode` does: wire
/// types that do not match the field, groups, over-long varints, truncation, NUL bytes in the
/// user ids, a declared field with another wire type, or a field the full decoder must check
/// (enums such as `errorCode`, nested messages, repeated fields other than a batch receipt's
/// `receiptIds`, which it checks as the decoder does: at most `SIMPMessage.maxReceiptIds`
/// differences, none zero, no overflow). The caller then decodes the datagram in full, so the
/// relay's decisions never depend on which path read the bytes; a batch receipt that passes is
/// forwarded as its bytes like a single one.
public struct DatagramHeader: Equatable, Sendable {
    public var version: UInt32 = 0
    public var messageId: UInt64 = 0
    public var kind: SIMPMessage.Kind = .text
    public var fromUser: String = ""
    public var toUser: String = ""
    /// Whether it is a batch receipt (`receiptIds` set).
    public var isBatch = false

    public init(
        version: UInt32 = 0, messageId: UInt64 = 0, kind: SIMPMessage.Kind = .text, fromUser: String = "", toUser: String = "",
        isBatch: Bool = false
    ) {
        self.version = version
        self.messageId = messageId
        self.kind = kind
        self.fromUser = fromUser
        self.toUser = toUser
        self.isBatch = isBatch
    }

    /// The header of a decoded message.
    public init(_ message: SIMPMessage) {
        self.init(
            version: message.version, messageId: message.messageId, kind: message.kind,
            fromUser: message.fromUser, toUser: message.toUser, isBatch: !message.receiptIds.isEmpty)
    }

    /// Reads the header of the readable bytes of `buffer`, or nil if the full decoder must decide.
    public static func parse(_ buffer: ByteBuffer) -> DatagramHeader? {
        buffer.withUnsafeReadableBytes { parse(UnsafeRawBufferPointer($0)) }
    }

    /// Reads the header of a complete protobuf-encoded message, or nil if the full decoder must decide.
    public static func parse(_ bytes: UnsafeRawBufferPointer) -> DatagramHeader? {
        var reader = Reader(bytes: bytes)
        // Plain locals, the header built once at the end: a `DatagramHeader` (two strings)
        // changed field by field and returned as an optional was copied twice per datagram.
        var version: UInt32 = 0, messageId: UInt64 = 0, kind = SIMPMessage.Kind.text, isBatch = false
        var from: Range<Int>?, to: Range<Int>?
        var receiptIds = ReceiptIdDeltas()
        while !reader.atEnd {
            let keyStart = reader.offset
            guard let key = reader.varint(), reader.offset - keyStart <= 5,
                key >> 3 > 0, key >> 3 <= UInt64(UInt32.max >> 3)
            else { return nil }
            let field = key >> 3, wireType = key & 7
            switch (field, wireType) {
            case (1, 0):
                guard let value = reader.varint(), let value32 = UInt32(exactly: value) else { return nil }
                version = value32
            case (2, 0):
                guard let value = reader.varint() else { return nil }
                messageId = value
            case (8, 0):
                guard let value = reader.varint(), let raw = Int32(exactly: value),
                    let value = SIMPMessage.Kind(rawValue: raw)
                else { return nil }
                kind = value
            case (6, 2):
                guard let range = reader.lengthDelimited() else { return nil }
                from = range
            case (7, 2):
                guard let range = reader.lengthDelimited() else { return nil }
                to = range
            case (ReceiptIdDeltas.field, 0): // one difference, unpacked
                guard let delta = reader.varint(), receiptIds.add(delta) != nil else { return nil }
                isBatch = true
            case (ReceiptIdDeltas.field, 2): // a packed run of differences
                guard let range = reader.lengthDelimited() else { return nil }
                var run = Reader(bytes: UnsafeRawBufferPointer(rebasing: bytes[range]))
                while !run.atEnd {
                    guard let delta = run.varint(), receiptIds.add(delta) != nil else { return nil }
                    isBatch = true
                }
            default:
                // Any other field the proto declares must have its plain wire type; the full
                // decoder validates enums, nested messages and repeated fields.
                let declared = field < FieldTable.wireTypes.count ? FieldTable.wireTypes[Int(field)] : FieldTable.undeclared
                guard declared == FieldTable.undeclared || declared == wireType, reader.skip(wireType: wireType) else {
                    return nil
                }
            }
        }
        guard let fromUser = from.map({ reader.string($0) }) ?? "", let toUser = to.map({ reader.string($0) }) ?? "" else {
            return nil
        }
        // Returned as built: a header changed after its init was copied once more on the way out.
        return DatagramHeader(version: version, messageId: messageId, kind: kind, fromUser: fromUser, toUser: toUser, isBatch: isBatch)
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

        /// Skips a field's value of `wireType`; false for groups, invalid wire types or truncation.
        mutating func skip(wireType: UInt64) -> Bool {
            switch wireType {
            case 0: return varint() != nil
            case 1: return skip(8)
            case 2: return lengthDelimited() != nil
            case 5: return skip(4)
            default: return false
            }
        }

        mutating func skip(_ count: Int) -> Bool {
            guard bytes.count - offset >= count else { return false }
            offset += count
            return true
        }

        /// The byte range of a length-delimited field's payload. Like protobuf-c, takes a
        /// length of at most 5 bytes.
        mutating func lengthDelimited() -> Range<Int>? {
            let start = offset
            guard let length = varint(), offset - start <= 5, length <= UInt64(bytes.count - offset) else { return nil }
            let payload = offset
            offset += Int(length)
            return payload..<offset
        }

        /// The UTF-8 text in `range`, or nil if it holds a NUL (which the C decoder would cut at).
        func string(_ range: Range<Int>) -> String? {
            let slice = UnsafeRawBufferPointer(rebasing: bytes[range])
            guard !slice.contains(0) else { return nil }
            return String(decoding: slice, as: UTF8.self)
        }
    }
}

/// The wire type `simp.Message` declares for each field number, read from protobuf-c's
/// descriptor, so that fields added to the proto are checked here without a change.
private enum FieldTable {
    /// A field number the proto does not declare: skipped whatever its wire type.
    static let undeclared: UInt64 = 0xff
    /// A declared field `DatagramHeader.parse` leaves to the full decoder.
    static let fullDecoderOnly: UInt64 = 0xfe

    /// Indexed by field number, up to the largest declared one.
    static let wireTypes: [UInt64] = {
        let descriptor = simp__message__descriptor
        let fields = UnsafeBufferPointer(start: descriptor.fields, count: Int(descriptor.n_fields))
        var table = [UInt64](repeating: undeclared, count: Int(fields.map(\.id).max() ?? 0) + 1)
        for field in fields {
            table[Int(field.id)] = wireType(field)
        }
        return table
    }()

    private static func wireType(_ field: ProtobufCFieldDescriptor) -> UInt64 {
        guard field.label != PROTOBUF_C_LABEL_REPEATED, field.flags & UInt32(PROTOBUF_C_FIELD_FLAG_ONEOF.rawValue) == 0 else {
            return fullDecoderOnly
        }
        switch field.type {
        case PROTOBUF_C_TYPE_INT32, PROTOBUF_C_TYPE_SINT32, PROTOBUF_C_TYPE_UINT32, PROTOBUF_C_TYPE_INT64,
            PROTOBUF_C_TYPE_SINT64, PROTOBUF_C_TYPE_UINT64, PROTOBUF_C_TYPE_BOOL:
            return 0
        case PROTOBUF_C_TYPE_SFIXED64, PROTOBUF_C_TYPE_FIXED64, PROTOBUF_C_TYPE_DOUBLE: return 1
        case PROTOBUF_C_TYPE_STRING, PROTOBUF_C_TYPE_BYTES: return 2
        case PROTOBUF_C_TYPE_SFIXED32, PROTOBUF_C_TYPE_FIXED32, PROTOBUF_C_TYPE_FLOAT: return 5
        default: return fullDecoderOnly // enums (their values are checked) and nested messages
        }
    }
}
