import NIOCore

/// A control frame from the original SIMP lineage, whose `Message` declares `float version = 1`
/// (wire type fixed32) where this protocol has `uint32 version` (varint). protobuf-c refuses such
/// bytes as malformed; the relay answers them with UNSUPPORTED_VERSION and a text that says why
/// (docs/PROTOCOL.md §2.1). (The lineage's `uint64 time = 3` is a varint like `int64 time`, so
/// it alone needs nothing.)
public struct LineageFrame: Equatable, Sendable, CustomStringConvertible {
    /// The frame's float version (1.0 in the original SIMP).
    public var version: Float
    /// The frame's `messageId` (field 2), 0 if absent or unreadable.
    public var messageId: UInt64

    /// Whether `payload` is a lineage frame: its top-level fields parse, and field 1 is a
    /// fixed32. Pure; reads only `payload`'s readable bytes.
    public static func detect(_ payload: ByteBuffer) -> LineageFrame? {
        var bytes = payload
        var version: Float?
        var messageId: UInt64 = 0
        while bytes.readableBytes > 0 {
            guard let key = readVarint(&bytes) else { return nil }
            let field = key >> 3
            switch key & 7 {
            case 0:
                guard let value = readVarint(&bytes) else { return nil }
                if field == 1 { return nil } // a current version field
                if field == 2 { messageId = value }
            case 1:
                guard bytes.readSlice(length: 8) != nil else { return nil }
            case 2:
                guard let length = readVarint(&bytes), length <= bytes.readableBytes,
                    bytes.readSlice(length: Int(length)) != nil
                else { return nil }
            case 5:
                guard let bits = bytes.readInteger(endianness: .little, as: UInt32.self) else { return nil }
                if field == 1 { version = Float(bitPattern: bits) }
            default:
                return nil // groups (3, 4) and invalid wire types
            }
        }
        return version.map { LineageFrame(version: $0, messageId: messageId) }
    }

    /// The ERROR the relay answers it with.
    public var answer: SIMPMessage {
        .error(.unsupportedVersion, Self.explanation(version: version), messageId: messageId)
    }

    /// Why a lineage frame is refused, for the ERROR's text.
    public static func explanation(version: Float) -> String {
        "this frame has a float version (\(version)) as in the original SIMP Message; this relay speaks SIMP "
            + "version \(SIMPMessage.currentVersion), where version is a uint32 (varint) and time an int64 "
            + "(see docs/PROTOCOL.md section 2.1)"
    }

    public var description: String { "original-lineage frame (float version \(version), messageId \(messageId))" }

    private static func readVarint(_ bytes: inout ByteBuffer) -> UInt64? {
        var value: UInt64 = 0
        for shift in stride(from: UInt64(0), to: 64, by: 7) {
            guard let byte = bytes.readInteger(as: UInt8.self) else { return nil }
            value |= UInt64(byte & 0x7f) << shift
            if byte & 0x80 == 0 { return value }
        }
        return nil
    }
}
