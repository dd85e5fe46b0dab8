import NIOCore

/// Datagrams from and to the relay: sealing, opening, the HELLOs of a new session, and content
/// handed over in order with its receipts.
extension ClientSession {
    /// Seals a datagram of `output` for the relay (nil before the first login).
    public mutating func seal(_ message: SIMPMessage, allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer? {
        sealer?.seal(message, allocator: allocator)
    }

    /// A datagram arrived from the relay at `arrivedAt`: anything not authentic for the current
    /// session is dropped (and counted); a HELLO answer ends the HELLOs; content is receipted
    /// and delivered in order.
    /// `path`: how it came (over UDP, or in a DATAGRAM frame).
    public mutating func datagramArrived(_ bytes: ByteBuffer, arrivedAt: NIODeadline, now: NIODeadline, over path: DatagramPath = .udp) -> Output {
        guard let payload = try? opener?.open(bytes).payload, let message = try? MessageCodec.decode(payload) else {
            rejectedDatagrams += 1
            return Output()
        }
        if message.kind == .hello { return helloAnswered(over: path, now: now) }
        if path == .udp { paths?.arrivedOverUDP(now: now) }
        switch message.kind {
        case .receipt: // the fast copy; whichever copy comes first counts
            var output = Output()
            output.absorb(receiptHandled(message, now: now))
            return output
        case let kind where kind.isContent:
            if path == .udp { noteArrivalOverUDP(message, now: now) }
        case .typing:
            break
        case .fileChunk, .fileAck:
            var output = Output()
            if takesMessages || message.kind == .fileAck { output.fileDatagrams.append(message) }
            return output
        default:
            return Output()
        }
        return datagramReceived(message, arrivedAt: arrivedAt, now: now)
    }

    mutating func pollHello(now: NIODeadline) -> Output {
        var output = Output()
        guard let hello = phase.registration?.nextHello, hello.due <= now else { return output }
        output.datagrams.append(SIMPMessage(kind: .hello, fromUser: configuration.user))
        let next = hello.attemptsLeft > 1 ? Hello(due: now + configuration.helloInterval, attemptsLeft: hello.attemptsLeft - 1) : nil
        updateRegistration { $0.nextHello = next }
        return output
    }

    /// An authentic content datagram arrived at `arrivedAt`: hand over what is now in order
    /// and receipt what the application now has (a held message is receipted when released).
    public mutating func datagramReceived(_ message: SIMPMessage, arrivedAt: NIODeadline, now: NIODeadline) -> Output {
        if message.kind == .typing {
            var output = Output()
            output.peerEvents.append(.typing(from: message.fromUser))
            return output
        }
        var output = Output()
        guard takesMessages else { return output } // unseen: neither held, deduplicated nor receipted
        let outcome = receiver.receive(message, arrivedAt: arrivedAt, now: now)
        release(outcome.release, now: now, into: &output)
        if Self.suggestsLoss(message, outcome) { receiptsAreUrgent = true }
        return output
    }

    /// Whether an arrival says that datagrams or receipts were lost: a retransmission, a copy
    /// the application has, one held behind a gap, or one that filled a gap. Its sender is then
    /// waiting, so the receipts batched so far go at the end of the read burst instead of after
    /// the batch delay (docs/PROTOCOL.md §6.1).
    static func suggestsLoss(_ message: SIMPMessage, _ outcome: ReceiverCore.Outcome) -> Bool {
        message.attempt > 1 || outcome.verdict != .deliver || outcome.deliver.count != 1
    }

    /// The application takes no more messages (`simp listen --count N` has its N). Content that
    /// arrives from now on is dropped unseen and held messages are never released, so none of
    /// them is receipted: they stay with their senders, or in the relay's log, for another session.
    public mutating func stopTakingMessages() { takesMessages = false }

    /// Hands released messages to the application and sends their receipts (kept for the next
    /// connection when there is none).
    mutating func release(_ release: ReceiverCore.Release, now: NIODeadline, into output: inout Output) {
        guard takesMessages else { return }
        output.delivered += release.deliver
        for receipt in release.receipts { sendReceipt(receipt, now: now, into: &output) }
    }
}
