/// The persistent form of a room's sender keys (docs/E2E.md §9: `room/<room id>`), so posts
/// keep decrypting, and this device keeps its own chain, across restarts. Secret: it holds
/// chain keys and this device's signing key.
extension RoomSenderKeys {
    private static let version: UInt8 = 1

    /// Version 1: str16(room id) ‖ u16 member count ‖ each str16(member) ‖ own key ‖ u16 sender
    /// count ‖ each str16(sender) ‖ u8 key count ‖ each inbound key.
    public var secretBytes: SecretBytes {
        var writer = ByteWriter()
        writer.u8(Self.version)
        writer.lengthPrefixed(Array(roomID.utf8))
        writer.u16(UInt16(members.count))
        for member in members.sorted() { writer.lengthPrefixed(Array(member.utf8)) }
        outbound.write(to: &writer)
        writer.u16(UInt16(inbound.count))
        for (sender, keys) in inbound.sorted(by: { $0.key < $1.key }) {
            writer.lengthPrefixed(Array(sender.utf8))
            writer.u8(UInt8(keys.count))
            for key in keys { key.write(to: &writer) }
        }
        return SecretBytes(writer.bytes)
    }

    public init(secretBytes: [UInt8]) throws {
        var reader = ByteReader(secretBytes, reading: "room sender keys")
        try reader.expectVersion(Self.version)
        roomID = try reader.string()
        members = Set(try (0..<(try reader.u16())).map { _ in try reader.string() })
        outbound = try OutboundSenderKey(roomID: roomID, reading: &reader)
        for _ in 0..<(try reader.u16()) {
            let sender = try reader.string()
            inbound[sender] = try (0..<(try reader.u8())).map { _ in try InboundSenderKey(roomID: roomID, reading: &reader) }
        }
        try reader.expectEnd()
    }
}

extension OutboundSenderKey {
    /// key id ‖ iteration ‖ chain key ‖ signing seed.
    func write(to writer: inout ByteWriter) {
        writer.u32(keyID)
        writer.u32(iteration)
        writer.raw(chainKey.bytes)
        writer.raw(signingKey.bytes)
    }

    init(roomID: String, reading reader: inout ByteReader) throws {
        self.roomID = roomID
        keyID = try reader.u32()
        iteration = try reader.u32()
        chainKey = SecretBytes(try reader.key())
        signingKey = SecretBytes(try reader.key())
    }
}

extension InboundSenderKey {
    /// key id ‖ next iteration ‖ chain key ‖ signing public key ‖ skipped keys.
    func write(to writer: inout ByteWriter) {
        writer.u32(keyID)
        writer.u32(iteration)
        writer.raw(chainKey.bytes)
        writer.raw(signingKey)
        skipped.write(to: &writer)
    }

    init(roomID: String, reading reader: inout ByteReader) throws {
        self.roomID = roomID
        keyID = try reader.u32()
        iteration = try reader.u32()
        chainKey = SecretBytes(try reader.key())
        signingKey = try reader.key()
        skipped = try SkippedMessageKeys(reading: &reader)
    }
}

extension ByteReader {
    /// A `str16`: u16 length ‖ UTF-8.
    mutating func string() throws -> String { String(decoding: try lengthPrefixed(), as: UTF8.self) }
}
