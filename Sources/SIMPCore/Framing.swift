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
        MessageCodec.encode(message, into: &buffer, lengthPrefix: true)
    }

    /// Appends `payload` (an already encoded `SIMPMessage`) as one frame to `buffer`.
    public static func writeFrame(payload: ByteBuffer, into buffer: inout ByteBuffer) {
        payload.withUnsafeReadableBytes { bytes in
            _ = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: headerSize + bytes.count) { out in
                out.storeBytes(of: UInt32(bytes.count).bigEndian, as: UInt32.self)
                if !bytes.isEmpty { (out.baseAddress! + headerSize).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count) }
                return headerSize + bytes.count
            }
        }
    }

    /// Appends a DATAGRAM frame carrying `sealed` (docs/PROTOCOL.md §5.5) to `buffer`, encoded
    /// by hand: the same bytes `writeFrame(SIMPMessage.carrying(sealed))` writes (version 1,
    /// type 25, field 70), without building the message.
    public static func writeDatagramFrame(carrying sealed: ByteBuffer, into buffer: inout ByteBuffer) {
        // version 1, type DATAGRAM, then field 70's key (bytes); its length follows as a varint.
        let fixed: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = (0x08, 0x01, 0x40, UInt8(SIMPMessage.Kind.datagram.rawValue), 0xB2, 0x04)
        sealed.withUnsafeReadableBytes { bytes in
            var varintCount = 1
            while bytes.count >> (7 * varintCount) > 0 { varintCount += 1 }
            let payloadCount = MemoryLayout.size(ofValue: fixed) + varintCount + bytes.count
            _ = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: headerSize + payloadCount) { out in
                out.storeBytes(of: UInt32(payloadCount).bigEndian, as: UInt32.self)
                var offset = headerSize
                withUnsafeBytes(of: fixed) { UnsafeMutableRawBufferPointer(rebasing: out[offset...]).copyMemory(from: $0) }
                offset += MemoryLayout.size(ofValue: fixed)
                var rest = UInt64(bytes.count)
                repeat {
                    out[offset] = UInt8(rest & 0x7F) | (rest > 0x7F ? 0x80 : 0)
                    offset += 1
                    rest >>= 7
                } while rest > 0
                UnsafeMutableRawBufferPointer(rebasing: out[offset...]).copyMemory(from: bytes)
                return headerSize + payloadCount
            }
        }
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
