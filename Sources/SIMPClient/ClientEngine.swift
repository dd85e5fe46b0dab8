import Logging
import NIOCore
import NIOPosix
import SIMPCore

/// Runs the client's core on its event loop: `ReliableSender` and `ReceiverCore` for
/// messages, `Heartbeat` for the control channel, `Backoff` for reconnecting. It transmits
/// datagrams, answers them with receipts, keeps one timer for every deadline, and after a
/// reconnect resends everything unreceipted. Every method runs on `eventLoop`.
final class ClientEngine: @unchecked Sendable { // confined to eventLoop
    let eventLoop: EventLoop
    let configuration: ClientConfiguration
    private var logger: Logger { configuration.logger }
    private var sender: ReliableSender
    private var receiver = ReceiverCore()
    private var heartbeat: Heartbeat?
    private var backoff: Backoff?
    private var nextKeepalive: NIODeadline?
    private var nextPingId: UInt64 = 1
    private var waiters: [UInt64: EventLoopPromise<SendResult>] = [:]
    private var timer: Scheduled<Void>?
    private var timerDeadline: NIODeadline?
    /// The registered control connection, and one still in its CONNECT handshake.
    private(set) var control: Channel?
    private var handshake: (channel: Channel?, promise: EventLoopPromise<SIMPMessage>)?
    private var relayDatagramAddress: SocketAddress?
    var datagrams: Channel?
    private(set) var relayId: String?
    /// Called with each message delivered to the application.
    var onMessage: (SIMPMessage) -> Void = { _ in }
    /// Called on every connection state change.
    var onStateChange: (ConnectionState) -> Void = { _ in }
    /// Set by `SIMPClient.close()`: the coming connection loss is the user's own doing.
    var closedByUser = false

    init(configuration: ClientConfiguration, eventLoop: EventLoop) {
        self.configuration = configuration
        self.eventLoop = eventLoop
        self.sender = ReliableSender(firstMessageId: WallClock.microsecondsSinceEpoch(), policy: configuration.retransmit)
        self.backoff = configuration.reconnect.map(Backoff.init)
        sender.suspend() // nothing goes out before the relay accepted CONNECT
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
        message.fromUser = configuration.user
        if message.time == 0 { message.time = WallClock.millisecondsSinceEpoch() }
        let (id, output) = sender.submit(message, now: .now())
        let promise = eventLoop.makePromise(of: SendResult.self)
        waiters[id] = promise
        carryOut(output)
        return (id, promise.futureResult)
    }

    // MARK: Connecting

    /// Opens a control connection and registers; on CONNECTED, resumes sending.
    func connectControl() -> EventLoopFuture<Void> {
        let promise = eventLoop.makePromise(of: SIMPMessage.self)
        handshake = (nil, promise)
        ClientBootstrap(group: eventLoop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(configuration.connectTimeout)
            .channelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addSIMPControlHandlers(
                        maxFrameSize: configuration.maxFrameSize, ClientControlHandler(engine: self))
                }
            }
            .connect(host: configuration.serverHost, port: configuration.serverPort)
            .whenComplete { [self] result in
                switch result {
                case .failure(let error):
                    promise.fail(SIMPClientError.cannotConnect("\(configuration.serverHost):\(configuration.serverPort): \(error)"))
                case .success(let channel):
                    handshake?.channel = channel
                    var connect = SIMPMessage(kind: .connect, fromUser: configuration.user, time: WallClock.millisecondsSinceEpoch())
                    connect.udpPort = UInt32(configuration.advertisedUDPPort ?? datagrams?.localAddress?.port ?? 0)
                    channel.writeAndFlush(connect, promise: nil)
                    eventLoop.scheduleTask(in: configuration.connectTimeout) {
                        promise.fail(SIMPClientError.timedOut("waiting for the relay to accept CONNECT"))
                    }
                }
            }
        return promise.futureResult.flatMapErrorThrowing { [self] error in
            handshake?.channel?.close(promise: nil)
            handshake = nil
            throw error
        }.map { [self] accepted in adopt(accepted) }
    }

    private func adopt(_ accepted: SIMPMessage) {
        guard let channel = handshake?.channel else { return }
        handshake = nil
        control = channel
        relayId = accepted.relayId
        var relayUDP = channel.remoteAddress!
        relayUDP.port = Int(accepted.udpPort)
        relayDatagramAddress = configuration.datagramTarget ?? relayUDP
        let now = NIODeadline.now()
        heartbeat = Heartbeat(policy: configuration.heartbeat, now: now)
        nextKeepalive = now + configuration.keepaliveInterval
        backoff?.reset()
        logger.debug("connected", metadata: ["relay": "\(accepted.relayId)", "udp": "\(relayDatagramAddress!)"])
        onStateChange(.connected(relayId: accepted.relayId))
        carryOut(sender.resume(now: now))
    }

    private func scheduleReconnect() {
        guard var backoff, !closedByUser else { return }
        let (attempt, delay) = backoff.next(random: Double.random(in: 0..<1))
        self.backoff = backoff
        onStateChange(.reconnecting(attempt: attempt, delay: delay))
        eventLoop.scheduleTask(in: delay) { [self] in
            guard !closedByUser else { return }
            connectControl().whenFailure { [self] error in
                logger.debug("reconnect failed", metadata: ["attempt": "\(attempt)", "error": "\(error)"])
                scheduleReconnect()
            }
        }
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

    func controlReceived(_ message: SIMPMessage, on channel: Channel) {
        if channel === handshake?.channel {
            switch message.kind {
            case .connected: handshake?.promise.succeed(message)
            case .error: handshake?.promise.fail(SIMPClientError.rejected(message.errorCode, message.errorText))
            default: break
            }
            return
        }
        guard channel === control else { return }
        heartbeat?.heard(at: .now())
        switch message.kind {
        case .receipt:
            carryOut(sender.handleReceipt(message, now: .now()))
        case .error where message.messageId != 0 && sender.isPending(message.messageId):
            carryOut(sender.handleRejection(
                messageId: message.messageId, code: message.errorCode, reason: message.errorText, now: .now()))
        case .error:
            logger.warning("relay reported an error", metadata: ["code": "\(message.errorCode)", "text": "\(message.errorText)"])
        case .ping:
            var pong = SIMPMessage(kind: .pong, messageId: message.messageId)
            pong.time = message.time
            channel.writeAndFlush(pong, promise: nil)
        default:
            break
        }
    }

    /// A control channel closed: a handshake fails; a registered session is suspended and,
    /// with a reconnect policy, retried; otherwise waiting callers learn it was lost.
    func controlClosed(_ channel: Channel) {
        if channel === handshake?.channel {
            handshake?.promise.fail(SIMPClientError.connectionLost)
            return
        }
        guard channel === control else { return }
        control = nil
        heartbeat = nil
        nextKeepalive = nil
        sender.suspend()
        armTimer()
        if backoff != nil, !closedByUser {
            logger.info("lost the relay; reconnecting")
            scheduleReconnect()
            return
        }
        if !closedByUser { onStateChange(.offline(reason: "connection to the relay was lost")) }
        for (id, promise) in waiters { promise.succeed(.connectionLost(messageId: id)) }
        waiters.removeAll()
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

    /// Keeps one scheduled task at the earliest deadline: retransmission, held message,
    /// heartbeat, keepalive.
    private func armTimer() {
        let deadlines = [sender.nextDeadline, receiver.nextDeadline, heartbeat?.nextDeadline, nextKeepalive]
        guard let deadline = deadlines.compactMap({ $0 }).min() else {
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
            timerFired(now: .now())
        }
    }

    private func timerFired(now: NIODeadline) {
        receiver.poll(now: now).forEach(onMessage)
        if let action = heartbeat?.poll(now: now) {
            switch action {
            case .none: break
            case .sendPing:
                var ping = SIMPMessage(kind: .ping, messageId: nextPingId, fromUser: configuration.user)
                ping.time = WallClock.millisecondsSinceEpoch()
                nextPingId += 1
                control?.writeAndFlush(ping, promise: nil)
            case .peerDead:
                logger.info("the relay stopped answering", metadata: ["silent": "\(configuration.heartbeat.deadAfter)"])
                control?.close(promise: nil) // controlClosed takes it from here
            }
        }
        if let keepalive = nextKeepalive, keepalive <= now {
            sendKeepalive()
            nextKeepalive = now + configuration.keepaliveInterval
        }
        carryOut(sender.poll(now: now))
    }

    /// A PING datagram to the relay keeps the NAT mapping of our UDP port open.
    private func sendKeepalive() {
        guard let datagrams, let target = relayDatagramAddress else { return }
        let ping = SIMPMessage(kind: .ping, fromUser: configuration.user)
        datagrams.writeAndFlush(AddressedEnvelope(remoteAddress: target, data: MessageCodec.encode(ping, allocator: datagrams.allocator)), promise: nil)
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
