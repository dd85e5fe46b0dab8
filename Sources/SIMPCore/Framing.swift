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
}

/// Raised by `FrameDecoder` when a peer announces a frame above the limit.
public struct FrameTooLargeError: Error, Equatable, Sendable {
    public let announcedSize: Int
    public let maxFrameSize: Int
}

/// Splits a byte stream into frame payloads, whatever way TCP cut or merged them.
///
/// Works without a channel through `NIOSingleStepByteToMessageProcessor`, and in a pipeline
/// through `ByteToMessageHandler`. Payloads are not decoded here: a malformed payload is the
/// caller's to answer, a malformed stream (an oversized frame) is an error.
public struct FrameDecoder: NIOSingleStepByteToMessageDecoder {
    public typealias InboundOut = ByteBuffer
    public let maxFrameSize: Int

    public init(maxFrameSize: Int = Framing.defaultMaxFrameSize) {
        self.maxFrameSize = maxFrameSize
    }

    public mutating func decode(buffer: inout ByteBuffer) throws -> ByteBuffer? {
        guard let length = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self) else { return nil }
        guard length <= maxFrameSize else {
            throw FrameTooLargeError(announcedSize: Int(length), maxFrameSize: maxFrameSize)
        }
        guard buffer.readableBytes >= Framing.headerSize + Int(length) else { return nil }
        buffer.moveReaderIndex(forwardBy: Framing.headerSize)
        return buffer.readSlice(length: Int(length))
    }

    public mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws -> ByteBuffer? {
        try decode(buffer: &buffer)
    }
}

/// Writes outbound `SIMPMessage`s as frames.
public struct FrameEncoder: MessageToByteEncoder {
    public typealias OutboundIn = SIMPMessage
    public init() {}
    public func encode(data: SIMPMessage, out: inout ByteBuffer) throws {
        Framing.writeFrame(data, into: &out)
    }
}

extension ChannelPipeline.SynchronousOperations {
    /// Adds SIMP control framing (bounded `FrameDecoder` in, `FrameEncoder` out) followed by
    /// `handler`, which then reads frame payloads and writes `SIMPMessage`s.
    public func addSIMPControlHandlers(maxFrameSize: Int, _ handler: ChannelHandler) throws {
        try addHandlers([
            ByteToMessageHandler(FrameDecoder(maxFrameSize: maxFrameSize)),
            MessageToByteHandler(FrameEncoder()),
            handler,
        ])
    }
}
