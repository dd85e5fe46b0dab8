import Logging
import NIOCore
import NIOPosix
import NIOSSL
import SIMPCommandLine
import SIMPCore
import SIMPNIO

/// Runs the client's `ClientSession` on its event loop over SwiftNIO sockets: the control
/// connection's handshake, datagrams in and out, one timer at the session's deadline, and the
/// callers waiting for their messages' outcomes. Every method runs on `eventLoop`. What it takes
/// from its surroundings (connecting, clocks, randomness, the first id) is its `Environment`: the
/// process's sockets and clocks, or simp-lab's `EmbeddedChannel`s in virtual time.
package final class ClientEngine: ClientShell, @unchecked Sendable { // confined to eventLoop
    package let eventLoop: EventLoop
    let configuration: ClientConfiguration
    let environment: Environment
    var logger: Logger { configuration.logger }
    package var session: ClientSession
    private var metrics: ClientMetrics
    private var waiters: [UInt64: EventLoopPromise<SendResult>] = [:]
    /// Messages whose callers heard `.connectionLost` when the session stopped and that are
    /// still sent after `connectAgain`: a delivery is then reported as a notice.
    private var givenUp: Set<UInt64> = []
    /// Room and WHO requests waiting for their answer, by request id.
    private var requestWaiters: [UInt64: EventLoopPromise<[String]>] = [:]
    /// KEYS_PUBLISH and KEYS_FETCH requests waiting for their answer frame, by request id, and
    /// answers that came (taken when the session reports the reply).
    private var keyWaiters: [UInt64: EventLoopPromise<SIMPMessage>] = [:]
    private var keyAnswers: [UInt64: SIMPMessage] = [:]
    private var timer: Scheduled<Void>?
    private var timerDeadline: NIODeadline?
    /// The registered control connection, and one still logging in.
    package internal(set) var control: Channel?
    var handshake: (channel: Channel?, promise: EventLoopPromise<(SIMPMessage, ClientSession.Output)>)?
    /// The access token's renewal on the registered connection (docs/PROTOCOL.md §4.9).
    var tokenRenewal = TokenRenewalState()
    var relayDatagramAddress: SocketAddress?
    package var datagrams: Channel?
    /// TLS for the control channel, built once from `configuration.tls`.
    var tlsContext: NIOSSLContext?
    /// Sent messages whose outcome is not known and that are not in the outbox (there is none,
    /// or it could not be written): kept in memory only, so lost when the process ends
    /// (ClientEngine+Outbox writes them to the outbox once it can, as `OutboxKeeping` decides).
    var keptInMemoryOnly: [UInt64: SIMPMessage] { session.outboxKeeping.inMemory }
    /// The outbox's group commit (ClientEngine+Outbox).
    var outboxBurst = OutboxBurst()
    var relayId: String?
    /// Called with each message delivered to the application; returns whether the application
    /// took it as new (false: it had it already, before a restart).
    package var onMessage: (SIMPMessage) -> Bool = { _ in true }
    /// Called with news about messages stored for offline receivers.
    package var onNotice: (DeliveryNotice) -> Void = { _ in }
    /// Called with each sent message still without a receipt after the policy's delay notice
    /// time (it is still being sent).
    var onDelay: (DelayedMessage) -> Void = { _ in }
    /// Called with news about peers (typing, presence).
    var onPeerEvent: (PeerEvent) -> Void = { _ in }
    var onFileDatagram: (SIMPMessage) -> Void = { _ in }
    /// Called once per output of the session, before its outcomes are reported (its counters
    /// may be read from `session`).
    package var onOutput: (ClientSession.Output) -> Void = { _ in }
    /// Called when the datagrams move to another path (docs/PROTOCOL.md §5.5).
    var onPathChange: (DatagramPath) -> Void = { _ in }
    /// Called on every connection state change.
    package var onStateChange: (ConnectionState) -> Void = { _ in }
    /// Set by `SIMPClient.close()`: the coming connection loss is the user's own doing
    /// (`ConnectionLifecycle.closedByUser`).
    var closedByUser: Bool { session.lifecycle.closedByUser }
    /// Whether the session stopped for good (taken over, or its login refused): the core
    /// decides (`ClientSession.stopped`), and then nothing is reconnected.
    var stopped: ClientSession.Stop? { session.stopped }
    /// Whether a newer session of this device took the relay session over (docs/PROTOCOL.md §4.7).
    var takenOver: Bool {
        if case .takenOver? = session.stopped { return true }
        return false
    }

    /// An engine for `configuration` on `eventLoop`, in `environment` (default: the process's
    /// sockets and clocks, `Environment.production`).
    package init(configuration: ClientConfiguration, eventLoop: EventLoop, environment: Environment? = nil) {
        self.configuration = configuration
        self.eventLoop = eventLoop
        let environment = environment ?? .production(configuration)
        self.environment = environment
        var core = ClientSession.Configuration(
            user: configuration.user, firstMessageId: environment.firstMessageId, password: configuration.password)
        core.retransmit = configuration.retransmit
        core.pacing = configuration.pacing
        core.heartbeat = configuration.heartbeat
        core.reconnect = configuration.reconnect
        core.keepaliveInterval = configuration.keepaliveInterval
        core.orderingHoldLimit = configuration.orderingHoldLimit
        core.receiptsWhenReleased = configuration.receiptsWhenReleased
        core.batchesReceipts = configuration.batchesReceipts
        core.receiptBatchDelay = configuration.receiptBatchDelay
        core.deliveryLimit = configuration.deliveryLimit
        core.device = configuration.device
        core.sendOnly = configuration.sendOnly
        core.relays = configuration.servers.map(\.description)
        core.loginTimeout = configuration.connectTimeout
        core.hidePresence = configuration.hidePresence
        self.session = ClientSession(configuration: core)
        self.metrics = ClientMetrics(factory: configuration.metricsFactory)
    }

    /// Counters for reports: retransmissions, spurious ones, duplicates suppressed.
    var statistics: ClientStatistics {
        ClientStatistics(
            retransmits: session.sender.retransmits, spuriousRetransmits: session.sender.spuriousRetransmits,
            extraCopies: session.sender.extraCopiesSent,
            duplicatesSuppressed: session.receiver.suppressed, smoothedRTT: session.sender.estimator.smoothedRTT,
            rto: session.sender.estimator.rto, inFlight: session.sender.inFlightCount,
            pathSwitches: session.pathSwitches.toControl + session.pathSwitches.toUDP,
            pacing: session.sender.pacer?.limit, rateLimitRefusals: session.sender.pacer?.refusals ?? 0)
    }

    /// The time on the engine's clock.
    package var now: NIODeadline { environment.now() }

    /// Submits a content message; returns its id and its outcome.
    package func send(_ message: SIMPMessage) -> (UInt64, EventLoopFuture<SendResult>) {
        var message = message
        if message.time == 0 { message.time = environment.wallClockMillis() }
        let (id, output) = session.submit(message, now: now)
        let promise = eventLoop.makePromise(of: SendResult.self)
        waiters[id] = promise
        saveInOutbox(message, id: id) // before its first transmission
        carryOutWhenKept(output)
        return (id, promise.futureResult)
    }

    /// Sends a ROOM_JOIN, ROOM_LEAVE or ROOM_MEMBERS frame; the future has the members the
    /// relay answered with, or fails with `SIMPClientError`.
    func roomRequest(_ kind: SIMPMessage.Kind, room: String, users: [String] = []) -> EventLoopFuture<[String]> {
        guard let control else { return eventLoop.makeFailedFuture(SIMPClientError.connectionLost) }
        let request = session.request(kind, room: room, users: users, now: now)
        let promise = eventLoop.makePromise(of: [String].self)
        requestWaiters[request.messageId] = promise
        control.writeAndFlush(request, promise: nil)
        armTimer(at: session.nextDeadline)
        // Who the relay lists is news for room admission (EndToEnd+Admission).
        return promise.futureResult.map { [self] members in
            endToEnd?.roomAnswered(kind, room: room, members: members)
            return members
        }
    }

    /// Sends a KEYS_PUBLISH or KEYS_FETCH frame (`fill` sets its fields); the future has the
    /// relay's answer frame, or fails with `SIMPClientError`.
    func keysRequest(_ kind: SIMPMessage.Kind, fill: (inout SIMPMessage) -> Void) -> EventLoopFuture<SIMPMessage> {
        guard let control else { return eventLoop.makeFailedFuture(SIMPClientError.connectionLost) }
        if kind == .keysPublish { // keys it publishes are stored first (a fetch reveals nothing: it waits for no write)
            do { try endToEnd?.commit() } catch { return eventLoop.makeFailedFuture(error) }
        }
        let request = session.request(kind, now: now, fill: fill)
        let promise = eventLoop.makePromise(of: SIMPMessage.self)
        keyWaiters[request.messageId] = promise
        control.writeAndFlush(request, promise: nil)
        armTimer(at: session.nextDeadline) // the session times the answer out, and sends it again after RATE_LIMITED
        return promise.futureResult
    }

    // MARK: Input

    /// Tells `user` this user is typing (at most once).
    func sendFileDatagrams(_ messages: [SIMPMessage]) {
        carryOut(session.sendFileDatagrams(messages))
    }

    func typing(to user: String) {
        carryOut(session.typing(to: user))
    }

    /// Tells `sender` its messages up to `upTo` were seen.
    func markRead(from sender: String, upTo: UInt64) {
        carryOut(session.markRead(from: sender, upTo: upTo, now: now))
    }

    func datagramReceived(_ bytes: ByteBuffer, at arrival: NIODeadline) {
        if let block = configuration.udpBlock, block.isBlocking { return }
        let rejectedBefore = session.rejectedDatagrams
        let output = session.datagramArrived(bytes, arrivedAt: arrival, now: now)
        if session.rejectedDatagrams > rejectedBefore {
            logger.debug("dropped a datagram that is not authentic for this session", metadata: ["bytes": "\(bytes.readableBytes)"])
        }
        carryOut(output)
    }

    /// The user closes the client (`ClientSession.finishTakingMessages`).
    package func finishTakingMessages() {
        session.userClosed()
        carryOut(session.finishTakingMessages(now: now))
    }

    /// A burst of datagram reads ended: the receipts batched during it go out, or keep waiting
    /// for others (`ClientConfiguration.receiptBatchDelay`). The session hears of every burst's
    /// end, even one that left no receipt batched: an arrival that suggested loss makes only
    /// its own burst's receipts urgent.
    func datagramBurstEnded() {
        carryOut(session.datagramBurstEnded(now: now))
    }

    func controlReceived(_ message: SIMPMessage, on channel: Channel) {
        if channel === handshake?.channel {
            switch session.loginReceived(message, now: now) {
            case .send(let frame)?: channel.writeAndFlush(frame, promise: nil)
            case .registered(let connected, let output)?: handshake?.promise.succeed((connected, output))
            case .refused(let code, let reason)?: handshake?.promise.fail(SIMPClientError.rejected(code, reason))
            case nil: break
            }
            return
        }
        guard channel === control else { return }
        if tokenRefreshAnswered(message) { return }
        if message.kind == .keysPublish, message.messageId == 0 { return endToEnd?.keysChanged(message, via: self) ?? () }
        if message.kind == .keysFetch, message.messageId == 0 { return endToEnd?.askedToPublish(message, via: self) ?? () }
        let message = endToEnd?.readersCounted(message) ?? message // a room post's mark counts its readers only
        if session.isReply(message) {
            if message.kind == .keysPublish || message.kind == .keysFetch { keyAnswers[message.messageId] = message }
            return carryOut(session.controlReceived(message, now: now))
        }
        guard message.kind == .error else { return carryOut(session.controlReceived(message, now: now)) }
        let isNotice = message.errorCode == .inboxFull || message.errorCode == .inboxExpired // reported as a DeliveryNotice
        if message.errorCode == .rateLimited {
            logger.warning(
                "the relay is throttling this client", metadata: ["retryAfterMillis": "\(message.retryAfterMillis)", "text": "\(message.errorText)"])
        }
        let sentHere = session.sender.isPending(message.messageId) // its failure is reported as the message's outcome
        let output = session.controlReceived(message, now: now) // decides whether it was taken over
        if message.messageId != 0, !sentHere, !isNotice, message.errorCode != .rateLimited {
            // The relay tells every session of the user about a message one of them sent: another
            // device's (or a `simp send`'s) error is not this session's news.
            logger.debug(
                "an error about a message this session is not sending", metadata: ["id": "\(message.messageId)", "code": "\(message.errorCode)"])
        } else if message.errorCode == .sessionEnded {
            logger.warning("\(message.errorText); logging in again")
        } else if message.messageId == 0, !takenOver {
            logger.warning("relay reported an error", metadata: ["code": "\(message.errorCode)", "text": "\(message.errorText)"])
        }
        carryOut(output)
    }

    /// An error on a control channel: during the login, a TLS failure fails the connect with
    /// its reason (the channel closes next).
    func controlFailed(_ channel: Channel, _ error: Error) {
        guard channel === handshake?.channel, let tls = configuration.tls, let failure = ClientTLS.failure(error) else { return }
        handshake?.promise.fail(Self.connectError(session.lifecycle.tlsFailed(failure, host: server.host, trustedCA: tls.caFile)))
    }

    /// A control channel closed: a handshake fails; a registered session is suspended and
    /// reconnected, stopped or offline as the session decides (`ClientSession.connectionLost`).
    func controlClosed(_ channel: Channel) {
        if channel === handshake?.channel {
            // A relay that runs TLS closes a plain-TCP client's connection without a word.
            handshake?.promise.fail(Self.connectError(session.lifecycle.closedDuringLogin(usesTLS: configuration.tls != nil)))
            return
        }
        guard channel === control else { return }
        control = nil
        tokenRenewal.cancel()
        let (output, step) = session.connectionLost(random: environment.random())
        if case .reconnect(let failover) = step {
            logger.info("lost the relay; reconnecting")
            if let failover { logNextServer(after: nil, from: failover.from) }
        }
        carryOut(output)
        follow(step)
    }

    /// The session stopped for good (`ClientSession.stopped`): says why, and callers waiting
    /// for outcomes learn the connection was lost (their messages stay in the outbox).
    func stop(because reason: String) {
        logger.notice("\(reason)")
        onStateChange(.offline(reason: reason))
        failWaiters()
    }

    /// The client closed (`SIMPClient.close()`; the last work on this loop before it stops):
    /// no caller is left waiting on a loop that no longer runs. Messages without an outcome
    /// are `.connectionLost` (they stay in the outbox), requests and a login under way fail with
    /// `SIMPClientError.closed`, and the timer stops.
    func closed() {
        session.userClosed()
        do { try endToEnd?.commitAtClose() } catch { logger.warning("cannot write this device's end-to-end state", metadata: ["error": "\(error)"]) }
        armTimer(at: nil)
        handshake?.promise.fail(SIMPClientError.closed)
        failWaiters()
        for waiter in requestWaiters.values { waiter.fail(SIMPClientError.closed) }
        for waiter in keyWaiters.values { waiter.fail(SIMPClientError.closed) }
        requestWaiters.removeAll()
        keyWaiters.removeAll()
        keyAnswers.removeAll()
    }

    func failWaiters() {
        for (id, promise) in waiters { promise.succeed(.connectionLost(messageId: id)) }
        givenUp.formUnion(waiters.keys)
        waiters.removeAll()
        givenUp.formUnion(failHeldMessages())
    }

    // MARK: Output (ClientShell: `carryOut` interprets the session's output)

    package var datagramAllocator: ByteBufferAllocator? { relayDatagramAddress == nil ? nil : datagrams?.allocator }

    /// End-to-end encryption, when configured (set by `SIMPClient.connect`).
    var endToEnd: EndToEnd?
    /// Messages waiting until they can be sealed (`sealAndSend`).
    let heldForKeys = HeldForKeys()
    /// Room posts the application took late (`takeLate`) and not counted yet by the session.
    var lateTaken = 0
    /// How many new messages the application may take now (nil: no limit).
    var lateAllowance: Int?

    package func sendDatagrams(_ sealed: [ByteBuffer]) {
        guard let datagrams, let target = relayDatagramAddress else { return }
        if let block = configuration.udpBlock, block.isBlocking { return }
        for bytes in sealed { datagrams.write(AddressedEnvelope(remoteAddress: target, data: bytes), promise: nil) }
        datagrams.flush()
    }

    package func writeControl(_ frames: [SIMPMessage]) {
        for frame in frames { control?.write(frame, promise: nil) }
        control?.flush()
    }

    package func messageDelayed(_ message: DelayedMessage) { onDelay(message) }

    package func willWrite(_ output: inout ClientSession.Output) { endToEnd?.commitBeforeWriting(&output) }

    package func datagramPathChanged(to path: DatagramPath) {
        switch path {
        case .control:
            logger.notice("UDP does not get through to the relay: datagrams go over the control connection (docs/PROTOCOL.md §5.5)")
        case .udp:
            logger.notice("UDP gets through again: datagrams go over UDP")
        }
        onPathChange(path)
    }

    package func outputWillBeReported(_ output: ClientSession.Output) {
        metrics.update(outcomes: output.outcomes, session: session)
        onOutput(output)
    }

    package func messageSettled(_ result: SendResult) {
        settled(result.messageId)
        waiters.removeValue(forKey: result.messageId)?.succeed(result)
        // Its caller heard `.connectionLost` when the session stopped; it was delivered after
        // `connectAgain`: said as a notice (no receiver name; a stored one has its notice).
        if givenUp.remove(result.messageId) != nil, case .delivered(let id, _, _) = result {
            onNotice(.delivered(messageId: id, to: ""))
        }
    }

    package func noticeArrived(_ notice: DeliveryNotice) { onNotice(notice) }

    package func peerEventArrived(_ event: PeerEvent) { onPeerEvent(event) }

    package func fileDatagramArrived(_ message: SIMPMessage) { onFileDatagram(message) }

    package func requestAnswered(_ requestId: UInt64, _ result: Result<[String], SIMPClientError>) {
        requestWaiters.removeValue(forKey: requestId)?.completeWith(result.mapError { $0 })
        let answer = keyAnswers.removeValue(forKey: requestId)
        guard let waiter = keyWaiters.removeValue(forKey: requestId) else { return }
        switch result {
        case .success: waiter.succeed(answer ?? SIMPMessage(kind: .keysFetch))
        case .failure(let error): waiter.fail(error)
        }
    }

    package func closeControl() {
        logger.info("the relay stopped answering", metadata: ["silent": "\(configuration.heartbeat.deadAfter)"])
        control?.close(promise: nil) // controlClosed takes it from here
    }

    /// Keeps one scheduled task at the session's next deadline.
    package func armTimer(at deadline: NIODeadline?) {
        guard let deadline else {
            timer?.cancel()
            timer = nil
            timerDeadline = nil
            return
        }
        if let timerDeadline, timerDeadline <= deadline, timer != nil { return }
        timer?.cancel()
        timerDeadline = deadline
        timer = schedule(at: deadline) { [self] in
            timer = nil
            timerDeadline = nil
            carryOut(session.poll(now: now))
        }
    }

    /// Schedules `task` on the loop at `deadline`, and tells the environment when it is due.
    @discardableResult
    func schedule(at deadline: NIODeadline, _ task: @escaping @Sendable () -> Void) -> Scheduled<Void> {
        let scheduled = eventLoop.scheduleTask(deadline: deadline, task)
        environment.taskScheduled(deadline)
        return scheduled
    }

    @discardableResult
    func schedule(in delay: TimeAmount, _ task: @escaping @Sendable () -> Void) -> Scheduled<Void> {
        schedule(at: now + delay, task)
    }
}
