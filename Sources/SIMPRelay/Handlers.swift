import NIOCore
import SIMPCore

/// One control connection: decoded frames in, `RelayEngine` decides.
package final class ControlChannelHandler: ChannelInboundHandler {
    package typealias InboundIn = ByteBuffer
    private let engine: RelayEngine
    private var id: ConnectionID?
    private var peer: SocketAddress?

    package init(engine: RelayEngine) { self.engine = engine }

    package func channelActive(context: ChannelHandlerContext) {
        let peer = context.remoteAddress
        self.peer = peer
        let id = engine.add(context.channel)
        self.id = id
        engine.connectionOpened(id, peer: peer)
        context.fireChannelActive()
    }

    package func channelInactive(context: ChannelHandlerContext) {
        if let id { engine.connectionClosed(id) }
        id = nil
        context.fireChannelInactive()
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let id, let peer else { return }
        engine.controlFrame(unwrapInboundIn(data), on: id, peer: peer)
    }

    package func channelReadComplete(context: ChannelHandlerContext) {
        engine.flushControl()
        context.fireChannelReadComplete()
    }

    /// Backpressure: the connection is read only while its client reads what it is sent.
    package func channelWritabilityChanged(context: ChannelHandlerContext) {
        if let id { engine.updateReading(id) }
        context.fireChannelWritabilityChanged()
    }

    package func errorCaught(context: ChannelHandlerContext, error: Error) {
        if let tooLarge = error as? FrameTooLargeError, let id {
            engine.frameTooLarge(on: id, tooLarge)
        } else {
            context.close(promise: nil)
        }
    }
}

/// The control listener's gate, before NIO's acceptor: a connection whose address already holds
/// its cap (the core's `refusesAccepted`) is closed as it is accepted, before its pipeline,
/// options and registration are set up.
final class AcceptGate: ChannelInboundHandler {
    typealias InboundIn = Channel
    private let engine: RelayEngine

    init(engine: RelayEngine) { self.engine = engine }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let accepted = unwrapInboundIn(data)
        guard engine.refusesAccepted(from: accepted.remoteAddress) else { return context.fireChannelRead(data) }
        accepted.close(promise: nil)
    }
}

/// The relay's UDP socket: every datagram goes to `RelayEngine`; forwards written during a
/// read burst are flushed together when the burst ends.
///
/// With a read hold, the channel is not read automatically (`autoRead` off): after a burst the
/// handler asks for the next read only once the hold has passed, so datagrams that arrive
/// meanwhile wait in the socket and are read, forwarded and flushed in one wake-up.
package final class DatagramHandler: ChannelInboundHandler {
    package typealias InboundIn = AddressedEnvelope<ByteBuffer>
    private let engine: RelayEngine
    private let maxDatagramSize: Int
    private let readHold: TimeAmount
    /// When the current read burst began (for the forwarding-latency histogram).
    private var burstStart: NIODeadline?
    /// Whether a read is already scheduled for the end of the current hold.
    private var readScheduled = false

    package init(engine: RelayEngine, maxDatagramSize: Int, readHold: TimeAmount = .zero) {
        self.engine = engine
        self.maxDatagramSize = maxDatagramSize
        self.readHold = readHold
    }

    /// The engine writes its datagrams through this handler's context: past the pipeline's
    /// tail, with the envelope's type known (a write on the channel goes through NIO's generic
    /// entry point, which casts the envelope at run time).
    package func handlerAdded(context: ChannelHandlerContext) {
        engine.datagramWriter = context
        if readHold > .zero, context.channel.isActive { context.read() }
    }
    package func handlerRemoved(context: ChannelHandlerContext) { engine.datagramWriter = nil }

    package func channelActive(context: ChannelHandlerContext) {
        if readHold > .zero { context.read() }
        context.fireChannelActive()
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let now = burstStart ?? engine.now()
        burstStart = now
        let envelope = unwrapInboundIn(data)
        guard envelope.data.readableBytes <= maxDatagramSize else {
            engine.oversizedDatagram(envelope.data, from: envelope.remoteAddress)
            return
        }
        engine.datagram(envelope.data, from: envelope.remoteAddress, now: now)
    }

    package func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
        if let burstStart { engine.datagramBurstCompleted(startedAt: burstStart) }
        burstStart = nil
        if readHold > .zero { readAfterHold(context: context) }
    }

    private func readAfterHold(context: ChannelHandlerContext) {
        guard !readScheduled else { return }
        readScheduled = true
        context.eventLoop.assumeIsolated().scheduleTask(in: readHold) {
            self.readScheduled = false
            if context.channel.isActive { context.read() }
        }
    }

    package func errorCaught(context: ChannelHandlerContext, error: Error) {
        // A UDP socket reports e.g. ICMP port unreachable for earlier sends; keep serving.
    }
}
