import NIOCore

/// Control-channel framing: every frame is a 4-byte big-endian payload length, then the payload
/// (one protobuf-encoded `SIMPMessage`).
public enum Framing {
    /// Bytes in the length prefix.
    public static let headerSize = 4
    /// Default largest payload a peer may send; larger frames close the connection.
    public static let defaultMaxFrameSize = 64 * 1024

    /// Appends `message` as one frame to `buffer`.
    public static func writeFrame(_ message: SIMPMessage, into buffer: inout ByteBuffer) {
        let lengthIndex = buffer.writerIndex
        buffer.writeInteger(UInt32(0))
        MessageCodec.encode(message, into: &buffer)
        buffer.setInteger(UInt32(buffer.writerIndex - lengthIndex - headerSize), at: lengthIndex)
    }

    /// Appends `payload` (an already encoded `SIMPMessage`) as one frame to `buffer`.
    public static func writeFrame(payload: ByteBuffer, into buffer: inout ByteBuffer) {
        buffer.writeInteger(UInt32(payload.readableBytes))
        buffer.writeImmutableBuffer(payload)
    }

    /// Appends a DATAGRAM frame carrying `sealed` (docs/PROTOCOL.md §5.5) to `buffer`, encoded
    /// by hand: the same bytes `writeFrame(SIMPMessage.carrying(sealed))` writes (version 1,
    /// type 25, field 70), without building the message.
    public static func writeDatagramFrame(carrying sealed: ByteBuffer, into buffer: inout ByteBuffer) {
        let length = sealed.readableBytes
        var lengthVarint: [UInt8] = []
        var rest = UInt64(length)
        repeat {
            lengthVarint.append(UInt8(rest & 0x7F) | (rest > 0x7F ? 0x80 : 0))
            rest >>= 7
        } while rest > 0
        let fixed: [UInt8] = [0x08, 0x01, 0x40, UInt8(SIMPMessage.Kind.datagram.rawValue), 0xB2, 0x04] // version, type, field 70 bytes
        buffer.writeInteger(UInt32(fixed.count + lengthVarint.count + length))
        buffer.writeBytes(fixed)
        buffer.writeBytes(lengthVarint)
        buffer.writeImmutableBuffer(sealed)
    }

    /// Takes the next whole frame's payload off the front of `buffer`, whatever way TCP cut or
    /// merged the stream; nil until a whole frame is there. Throws when a peer announces a
    /// frame above `maxFrameSize`.
    public static func nextFrame(in buffer: inout ByteBuffer, maxFrameSize: Int) throws(FrameTooLargeError) -> ByteBuffer? {
        guard let length = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self) else { return nil }
        guard length <= maxFrameSize else {
            throw FrameTooLargeError(announcedSize: Int(length), maxFrameSize: maxFrameSize)
        }
        guard buffer.readableBytes >= headerSize + Int(length) else { return nil }
        buffer.moveReaderIndex(forwardBy: headerSize)
        return buffer.readSlice(length: Int(length))
    }
}

/// Raised by `FrameDecoder` when a peer announces a frame above the limit.
public struct FrameTooLargeError: Error, Equatable, Sendable {
    public let announcedSize: Int
    public let maxFrameSize: Int
}
