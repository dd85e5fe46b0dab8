import NIOCore
import SIMPCore

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
        try Framing.nextFrame(in: &buffer, maxFrameSize: maxFrameSize)
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
