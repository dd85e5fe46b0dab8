import Logging
import NIOCore
import SIMPCore

/// Runs `ReliableSender` and `ReceiverCore` on the client's event loop: transmits datagrams,
/// answers them with receipts, arms the retransmit timer. Every method runs on `eventLoop`.
final class ClientEngine: @unchecked Sendable { // confined to eventLoop
    let eventLoop: EventLoop
    let user: String
    private var sender: ReliableSender
    private var receiver = ReceiverCore()
    private let logger: Logger
    private var waiters: [UInt64: EventLoopPromise<SendResult>] = [:]
    private var timer: Scheduled<Void>?
    private var timerDeadline: NIODeadline?
    var control: Channel?
    var datagrams: Channel?
    var relayDatagramAddress: SocketAddress?
    /// Called with each message delivered to the application.
    var onMessage: (SIMPMessage) -> Void = { _ in }
    /// Called on every connection state change.
    var onStateChange: (ConnectionState) -> Void = { _ in }
    /// Set by `SIMPClient.close()`: the coming connection loss is the user's own doing.
    var closedByUser = false
    /// Called when the relay accepts CONNECT (or refuses it).
    var connectPromise: EventLoopPromise<SIMPMessage>?

    init(user: String, policy: RetransmitPolicy, eventLoop: EventLoop, logger: Logger) {
        self.user = user
        self.eventLoop = eventLoop
        self.logger = logger
        self.sender = ReliableSender(firstMessageId: WallClock.microsecondsSinceEpoch(), policy: policy)
    }

    /// Counters for reports: retransmissions, spurious ones, duplicates suppressed.
    var statistics: ClientStatistics {
        ClientStatistics(
            retransmits: sender.retransmits, spuriousRetransmits: sender.spuriousRetransmits,
            duplicatesSuppressed: receiver.suppressed, smoothedRTT: sender.estimator.smoothedRTT,
            rto: sender.estimator.rto, inFlight: sender.inFlightCount)
    }

    func send(_ message: SIMPMessage) -> (UInt64, EventLoopFuture<SendResult>) {
        var message = message
        message.fromUser = user
        if message.time == 0 { message.time = WallClock.millisecondsSinceEpoch() }
        let (id, output) = sender.submit(message, now: .now())
        let promise = eventLoop.makePromise(of: SendResult.self)
        waiters[id] = promise
        carryOut(output)
        return (id, promise.futureResult)
    }

    // MARK: Input

    func datagramReceived(_ bytes: ByteBuffer, at arrival: NIODeadline) {
        guard let message = try? MessageCodec.decode(bytes), message.kind.isContent else {
            logger.debug("ignored undecodable or non-content datagram", metadata: ["bytes": "\(bytes.readableBytes)"])
            return
        }
        let outcome = receiver.receive(message, arrivedAt: arrival, now: .now())
        control?.writeAndFlush(outcome.receipt, promise: nil)
        outcome.deliver.forEach(onMessage)
        if receiver.heldCount > 0 { armTimer() }
    }

    func controlReceived(_ message: SIMPMessage) {
        switch message.kind {
        case .connected:
            connectPromise?.succeed(message)
            connectPromise = nil
        case .receipt:
            carryOut(sender.handleReceipt(message, now: .now()))
        case .error where message.messageId != 0 && sender.isPending(message.messageId):
            carryOut(sender.handleRejection(
                messageId: message.messageId, code: message.errorCode, reason: message.errorText, now: .now()))
        case .error:
            if let connectPromise {
                connectPromise.fail(SIMPClientError.rejected(message.errorCode, message.errorText))
                self.connectPromise = nil
            } else {
                logger.warning("relay reported an error", metadata: ["code": "\(message.errorCode)", "text": "\(message.errorText)"])
            }
        case .ping:
            var pong = SIMPMessage(kind: .pong, messageId: message.messageId)
            pong.time = message.time
            control?.writeAndFlush(pong, promise: nil)
        default:
            logger.debug("ignored control message", metadata: ["kind": "\(message.kind)"])
        }
    }

    /// The control channel closed: every caller still waiting learns it.
    func controlClosed() {
        if connectPromise == nil, !closedByUser { onStateChange(.offline(reason: "connection to the relay was lost")) }
        connectPromise?.fail(SIMPClientError.connectionLost)
        connectPromise = nil
        for (id, promise) in waiters { promise.succeed(.connectionLost(messageId: id)) }
        waiters.removeAll()
        timer?.cancel()
        timer = nil
    }

    // MARK: Output

    private func carryOut(_ output: SenderOutput) {
        if let datagrams, let target = relayDatagramAddress, !output.transmit.isEmpty {
            for message in output.transmit {
                let bytes = MessageCodec.encode(message, allocator: datagrams.allocator)
                datagrams.write(AddressedEnvelope(remoteAddress: target, data: bytes), promise: nil)
            }
            datagrams.flush()
        }
        for event in output.events { report(event) }
        armTimer()
    }

    private func report(_ event: SenderEvent) {
        switch event {
        case .delivered(let id, _, let latency, let attempts):
            waiters.removeValue(forKey: id)?.succeed(.delivered(messageId: id, latency: latency, attempts: attempts))
        case .failed(let id, _, let failure):
            waiters.removeValue(forKey: id)?.succeed(.failed(messageId: id, failure))
        }
    }

    /// Keeps one scheduled task at the earliest of the sender's and the receiver's deadlines.
    private func armTimer() {
        guard let deadline = [sender.nextDeadline, receiver.nextDeadline].compactMap({ $0 }).min() else {
            timer?.cancel()
            timer = nil
            timerDeadline = nil
            return
        }
        if let timerDeadline, timerDeadline <= deadline, timer != nil { return }
        timer?.cancel()
        timerDeadline = deadline
        timer = eventLoop.scheduleTask(deadline: deadline) { [self] in
            timer = nil
            timerDeadline = nil
            receiver.poll(now: .now()).forEach(onMessage)
            carryOut(sender.poll(now: .now()))
        }
    }
}

/// A client's reliability counters.
public struct ClientStatistics: Sendable, Equatable {
    public var retransmits: Int
    public var spuriousRetransmits: Int
    public var duplicatesSuppressed: Int
    public var smoothedRTT: TimeAmount?
    public var rto: TimeAmount
    public var inFlight: Int
}
