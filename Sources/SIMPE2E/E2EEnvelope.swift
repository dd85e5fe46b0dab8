/// What a direct message carries end to end (docs/E2E.md §13): the sending device's name and
/// one pairwise payload per receiving device, by device name. The relay fans the one envelope
/// out to every device of the receiver; each device opens its own copy.
///
/// `0x01 ‖ 0x05 ‖ lengthPrefixed(sender device) ‖ u8 count ‖ count × (lengthPrefixed(device) ‖
/// u32 length ‖ pairwise payload)`.
public struct E2EEnvelope: Equatable, Sendable {
    /// The type byte after the version.
    public static let type: UInt8 = 5
    /// Most copies one envelope holds.
    public static let maxCopies = 255

    public let senderDevice: String
    public let copies: [(device: String, payload: [UInt8])]

    public init(senderDevice: String, copies: [(device: String, payload: [UInt8])]) {
        self.senderDevice = senderDevice
        self.copies = copies
    }

    public var encoded: [UInt8] {
        precondition(copies.count <= Self.maxCopies, "an envelope holds at most \(Self.maxCopies) copies")
        var writer = ByteWriter()
        writer.u8(1)
        writer.u8(Self.type)
        writer.lengthPrefixed(Array(senderDevice.utf8))
        writer.u8(UInt8(copies.count))
        for copy in copies {
            writer.lengthPrefixed(Array(copy.device.utf8))
            writer.u32(UInt32(copy.payload.count))
            writer.raw(copy.payload)
        }
        return writer.bytes
    }

    public init(encoded: [UInt8]) throws {
        var reader = ByteReader(encoded, reading: "envelope")
        try reader.expectVersion(1)
        guard try reader.u8() == Self.type else { throw E2EError.malformed("envelope: type is not 5") }
        senderDevice = try reader.lengthPrefixedUTF8()
        copies = try (0..<(try reader.u8())).map { _ in
            (try reader.lengthPrefixedUTF8(), try reader.raw(Int(try reader.u32())))
        }
        try reader.expectEnd()
    }

    public static func == (a: E2EEnvelope, b: E2EEnvelope) -> Bool {
        a.senderDevice == b.senderDevice && a.copies.map(\.device) == b.copies.map(\.device) && a.copies.map(\.payload) == b.copies.map(\.payload)
    }
}
