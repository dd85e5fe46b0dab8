import NIOCore
import SIMPCore

/// One sending user and one receiving user of the bench, each with its own control connection
/// (the UDP sockets are the load generator's, shared by all senders and by all receivers),
/// driving `ReliableSender` and `ReceiverCore` directly on the bench's event loop (no async hops
/// per message).
final class BenchPair {
    struct Offer {
        var at: NIODeadline
        /// Offered inside the measurement window, so its latency counts.
        var measured: Bool
    }

    let from: String
    let to: String
    var sender: ReliableSender
    var receiver = ReceiverCore()
    /// The receiver's receipts waiting for others to the same sender (flushed at the end of
    /// a read burst, or once the oldest has waited the run's receipt delay).
    var receiptBatcher: ReceiptBatcher
    /// Repeats the previous receipt copy's ids in the next, as the reference client does.
    var receiptRepeater = ReceiptRepeater()
    /// The receiver's relay routes batch receipts (older relays would drop their ids).
    var relayBatchesReceipts = false
    /// Messages offered and not yet receipted or failed, by id.
    var offers: [UInt64: Offer] = [:]
    /// Ids the receiving application was handed, to catch any delivered twice.
    var deliveredIds = DeliveredIds()
    /// Text that makes each datagram `size` bytes long.
    var content = ""
    /// The socket every sender's datagrams leave from (the load generator flushes it).
    var senderDatagrams: Channel!
    var senderControl: Channel!
    var receiverControl: Channel!
    /// Receipts written to `receiverControl` and not flushed yet.
    var receiptsPending = false
    var relayAddress: SocketAddress!
    /// Seals the sender's datagrams; opens the receiver's.
    var sealer: DatagramSealer!
    var opener: DatagramOpener!
    /// Seals the receiver's receipt datagrams; opens those the relay forwards to the sender.
    var receiptSealer: DatagramSealer!
    var receiptOpener: DatagramOpener!
    /// The receiver's relay's UDP address (where its receipt datagrams go) and datagram limit.
    var receiverRelayAddress: SocketAddress!
    var receiverMaxDatagramSize = SealedDatagram.defaultMaxDatagramSize

    /// The pair's number, which picks its relays in a multi-relay run.
    let index: Int
    /// Both users' datagrams go in DATAGRAM frames on their control connections
    /// (`LoadGenerator.Parameters.tcpPath`).
    var tcpPath = false
    /// TCP path: frames written to `senderControl` and not flushed yet.
    var senderFramesPending = false

    init(index: Int, prefix: String, policy: RetransmitPolicy, receiptDelay: TimeAmount) {
        self.index = index
        receiptBatcher = ReceiptBatcher(delay: receiptDelay)
        from = "\(prefix)-\(index)-a"
        to = "\(prefix)-\(index)-b"
        sender = ReliableSender(firstMessageId: WallClock.microsecondsSinceEpoch(), policy: policy)
    }

    /// Chooses the text length so a first transmission, sealed, is about `size` bytes.
    func sizeContent(toEncodedSize size: Int) {
        let size = size - SealedDatagram.overhead
        var probe = SIMPMessage(
            kind: .text, messageId: WallClock.microsecondsSinceEpoch(), fromUser: from, toUser: to,
            time: WallClock.millisecondsSinceEpoch())
        probe.attempt = 1
        var length = max(0, size - MessageCodec.encodedSize(of: probe))
        while length > 0 {
            probe.content = String(repeating: "x", count: length)
            if MessageCodec.encodedSize(of: probe) <= size { break }
            length -= 1
        }
        content = probe.content
    }

    /// Writes the sender's transmissions to the relay (flushed by the caller): over UDP, or on
    /// the TCP path in DATAGRAM frames on the sender's control connection.
    func write(_ transmissions: [SIMPMessage]) {
        for message in transmissions {
            let bytes = sealer.seal(message, allocator: senderDatagrams.allocator)
            if tcpPath {
                senderControl.write(SIMPMessage.carrying(bytes), promise: nil)
            } else {
                senderDatagrams.write(AddressedEnvelope(remoteAddress: relayAddress, data: bytes), promise: nil)
            }
        }
    }

    /// Says HELLO in a DATAGRAM frame on both control connections, as a client that found UDP
    /// blocked does: the relay sends both sessions' datagrams in frames from then on.
    func moveToTCPPath() {
        senderControl.writeAndFlush(SIMPMessage.carrying(sealer.seal(SIMPMessage(kind: .hello, fromUser: from))), promise: nil)
        receiverControl.writeAndFlush(SIMPMessage.carrying(receiptSealer.seal(SIMPMessage(kind: .hello, fromUser: to))), promise: nil)
    }

    /// Closes the control connections (the relay ends both sessions).
    func close() {
        for channel in [senderControl, receiverControl] as [Channel?] {
            channel?.close(promise: nil)
        }
    }
}

/// Hands the datagrams of the receivers' (or the senders') socket to the load run.
final class BenchDatagramHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    private let onDatagram: (ByteBuffer) -> Void
    private let onReadComplete: () -> Void

    init(onDatagram: @escaping (ByteBuffer) -> Void, onReadComplete: @escaping () -> Void) {
        self.onDatagram = onDatagram
        self.onReadComplete = onReadComplete
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) { onDatagram(unwrapInboundIn(data).data) }
    func channelReadComplete(context: ChannelHandlerContext) { onReadComplete() }
    func errorCaught(context: ChannelHandlerContext, error: Error) {}
}

/// Discards datagrams (idle sessions').
final class DiscardDatagramHandler: ChannelInboundHandler {
    typealias InboundIn = AddressedEnvelope<ByteBuffer>
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}
    func errorCaught(context: ChannelHandlerContext, error: Error) {}
}
