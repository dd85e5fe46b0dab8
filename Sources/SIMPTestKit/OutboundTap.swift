import NIOCore

/// First in an `EmbeddedChannel`'s pipeline: takes what the handlers write and hands it to
/// `written` when it is flushed (instead of leaving it in the channel's outbound buffer), and
/// reports the channel's close once the rest of the pipeline has seen it. Used for the relay's
/// channels here and for the simulated client's in SIMPLab.
package final class OutboundTap<Written>: ChannelOutboundHandler {
    package typealias OutboundIn = Written
    private let written: ((Written) -> Void)?
    private let closed: (() -> Void)?
    private var unflushed: [Written] = []

    package init(written: ((Written) -> Void)?, closed: (() -> Void)? = nil) {
        self.written = written
        self.closed = closed
    }

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard written != nil else { return context.write(data, promise: promise) }
        unflushed.append(unwrapOutboundIn(data))
        promise?.succeed()
    }

    package func flush(context: ChannelHandlerContext) {
        guard let written else { return context.flush() }
        let batch = unflushed
        unflushed.removeAll()
        batch.forEach(written)
    }

    package func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        let wasActive = context.channel.isActive
        context.close(mode: mode, promise: promise)
        if wasActive { closed?() }
    }
}
