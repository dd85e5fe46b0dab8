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

/// Splits a control connection's byte stream into frame payloads (`Framing.nextFrame`): the
/// pipeline's form of `FrameDecoder`, holding nothing between reads but an incomplete frame's
/// bytes. (`ByteToMessageHandler` keeps two ring buffers and an empty buffer per connection,
/// about 400 bytes an idle session does not need.) An oversized frame is reported as
/// `FrameTooLargeError` through `errorCaught`, and nothing more is read after it.
public final class FrameDecoderHandler: ChannelInboundHandler {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = ByteBuffer
    private let maxFrameSize: Int
    /// The start of a frame not yet complete.
    private var partial: ByteBuffer?
    private var failed = false

    public init(maxFrameSize: Int = Framing.defaultMaxFrameSize) { self.maxFrameSize = maxFrameSize }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }
        var buffer = Self.unwrapInboundIn(data)
        if var partial = self.partial.take() {
            partial.writeBuffer(&buffer)
            buffer = partial
        }
        do {
            while let frame = try Framing.nextFrame(in: &buffer, maxFrameSize: maxFrameSize) {
                context.fireChannelRead(Self.wrapInboundOut(frame))
                guard !failed else { return }
            }
        } catch {
            failed = true
            context.fireErrorCaught(error)
            return
        }
        if buffer.readableBytes > 0 {
            buffer.discardReadBytes()
            partial = buffer
        }
    }

    public func handlerRemoved(context: ChannelHandlerContext) { partial = nil }
}

/// Writes outbound `SIMPMessage`s as frames, each in a buffer of its own sized for it: the
/// pipeline's form of `FrameEncoder` that, unlike `MessageToByteHandler`, keeps no buffer
/// between writes.
public final class FrameEncoderHandler: ChannelOutboundHandler {
    public typealias OutboundIn = SIMPMessage
    public typealias OutboundOut = ByteBuffer

    public init() {}

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let message = Self.unwrapOutboundIn(data)
        var frame = context.channel.allocator.buffer(capacity: Framing.headerSize + MessageCodec.estimatedSize(of: message))
        Framing.writeFrame(message, into: &frame)
        context.write(Self.wrapOutboundOut(frame), promise: promise)
    }
}

extension Optional {
    /// The value, leaving nil behind.
    fileprivate mutating func take() -> Wrapped? {
        defer { self = nil }
        return self
    }
}

extension ChannelPipeline.SynchronousOperations {
    /// Adds SIMP control framing (bounded `FrameDecoderHandler` in, `FrameEncoderHandler` out)
    /// followed by `handler`, which then reads frame payloads and writes `SIMPMessage`s.
    public func addSIMPControlHandlers(maxFrameSize: Int, _ handler: ChannelHandler) throws {
        try addHandlers([FrameDecoderHandler(maxFrameSize: maxFrameSize), FrameEncoderHandler(), handler])
    }
}
