import CoreMetrics
import Logging
import NIOCore
import Prometheus
import SIMPCore
import SIMPNIO

/// The relay's one interpreter of `RelayCore`: it feeds the core what the channels and the
/// store report, with the time, and carries out the actions the core returns — writes,
/// closes, store requests, counting and logging — and keeps one timer at the core's next
/// deadline. It lives on `eventLoop`; every method must be called there.
package final class RelayEngine {
    package let eventLoop: EventLoop
    private(set) var core: RelayCore
    private let store: any RelayStore
    let logger: Logger
    let metrics: RelayMetrics
    /// Each control channel, by its frame encoder's context: its `channel` takes messages, and
    /// bytes that are already frames (`.forward`, `.carry`) are written at the context, past the
    /// encoder. Looked up once per connection; one table of 16-byte entries per connection (a
    /// second one of `Channel` existentials cost ~90 B per session at 18,000).
    private var frameWriters: [ConnectionID: ChannelHandlerContext] = [:]
    /// Connections the core stopped reading (`pauseReading`): too many requests waiting.
    private var readingPaused: Set<ConnectionID> = []
    private var nextConnection: UInt64 = 1
    package var datagramChannel: Channel?
    /// The datagram handler's context, where forwards are written (set by the handler).
    var datagramWriter: ChannelHandlerContext?
    /// Counts kept as things happen; `statistics` adds what the core knows.
    var counts = RelayStatistics()
    /// Action buffers reused between calls into the core (a call may nest: a close reports
    /// the connection's end at once).
    private var spareBuffers: [[RelayAction]] = []
    private var timer: Scheduled<Void>?
    /// Returns freed heap memory to the system after a burst of closed connections.
    private var memoryTrim = MemoryTrim()
    /// The store's answer to the withdrawal `shutDown` asked for.
    private var withdrawal: EventLoopFuture<Void>?
    /// When the one scheduled task runs the core's `tick` (nil: none is scheduled).
    package private(set) var timerDeadline: NIODeadline?
    /// Completed when the core says a graceful shutdown's drain is over.
    private var drained: EventLoopPromise<Void>?
    /// Set once the relay stops: nothing more is carried out but closes.
    private var stopped = false
    private var reportedRoundTrips = 0
    /// Datagram counts not yet added to the metrics (added once per read burst).
    private var unreportedReceived = 0, unreportedForwarded = 0
    /// Control connections with receipts written but not flushed yet, by their frame encoder's
    /// context, where they are flushed: nothing between the pipeline's tail and the encoder
    /// writes, so a flush there is the channel's flush without the hops from the tail.
    private var unflushedControl: [ConnectionID: ChannelHandlerContext] = [:]
    private var datagramFlushScheduled = false
    /// Set while a read burst of datagrams is handled: the datagram handler flushes at its end.
    private var inDatagramBurst = false
    /// Which read bursts the forwarding-latency histogram observes (one per millisecond at most).
    private var latencySampling = LatencySampling()

    /// The engine's clock (the event loop's time for an `EmbeddedEventLoop` in tests).
    package let now: () -> NIODeadline

    init(
        core: RelayCore, store: any RelayStore, eventLoop: EventLoop, logger: Logger, metrics: RelayMetrics,
        clock: @escaping () -> NIODeadline = NIODeadline.now
    ) {
        self.now = clock
        self.core = core
        self.core.anchorWallClock(WallClock.millisecondsSinceEpoch(), at: clock())
        self.store = store
        self.eventLoop = eventLoop
        self.logger = logger
        self.metrics = metrics
    }

    /// An engine for an embedding, with `clock` as its time. It keeps no logs or metrics (the
    /// test kit, the simulator) unless `instrumented`: then it keeps them as `simp-server` does,
    /// JSON lines on standard error from level info and the relay's metrics in a Prometheus
    /// registry of its own (for the instruction-count guard, which measures what production pays).
    package convenience init(
        core: RelayCore, store: any RelayStore, eventLoop: EventLoop, clock: @escaping () -> NIODeadline, instrumented: Bool = false
    ) {
        let logger =
            instrumented
            ? Logger(label: "simp.relay", factory: { JSONLogHandler.standardError(label: $0) })
            : Logger(label: "simp.relay.embedded", factory: { _ in SwiftLogNoOpLogHandler() })
        let factory: MetricsFactory = instrumented ? RelayPrometheus.factory(registry: PrometheusCollectorRegistry()) : NOOPMetricsHandler.instance
        self.init(core: core, store: store, eventLoop: eventLoop, logger: logger, metrics: RelayMetrics(factory: factory), clock: clock)
    }

    package var statistics: RelayStatistics {
        var snapshot = counts
        snapshot.connectedUsers = core.connectedUsers
        snapshot.sessionsOverControl = core.sessionsOverControl
        snapshot.draining = core.isDraining
        return snapshot
    }

    /// Feeds the core one input and carries out what it decided. `rearm: false` skips the
    /// timer check, for inputs that never bring a core deadline forward (a datagram's own work
    /// is done at once; what it starts in the store re-arms the timer when answered).
    private func handle(rearm: Bool = true, _ input: (inout RelayCore, inout [RelayAction]) -> Void) {
        var actions = spareBuffers.popLast() ?? []
        input(&core, &actions)
        // Taken from the end in the order they were appended: each action is moved out of the
        // buffer and carried out, not copied and destroyed twice, and the buffer is left empty
        // with its capacity (`removeAll` went through its generic replace, ~200 instructions).
        actions.reverse()
        while let action = actions.popLast() { perform(action) }
        spareBuffers.append(actions)
        if rearm { armTimer() }
    }

    // MARK: Lifecycle

    /// The sockets are bound: the core learns the UDP port and announces the relay.
    package func listening(udpPort: Int, description: String) {
        core.anchorWallClock(WallClock.millisecondsSinceEpoch(), at: now())
        handle { $0.listening(udpPort: udpPort, description: description, now: now(), into: &$1) }
    }

    /// The access-token key set was reloaded: tokens are checked with `verifier` from now on.
    package func replaceTokenVerifier(_ verifier: any AccessTokenVerifier) {
        handle { core, _ in core.replaceTokenVerifier(verifier) }
    }

    /// Starts the graceful drain; the future completes when the core says it is over.
    package func drain() -> EventLoopFuture<Void> {
        let promise = eventLoop.makePromise(of: Void.self)
        drained = promise
        handle { $0.beginDrain(now: now(), into: &$1) }
        return promise.futureResult
    }

    /// Withdraws every registration in one store request and closes every connection, as the
    /// core says (carried out like any of its actions); the future completes when the store has
    /// answered the withdrawal. Nothing the store answers afterwards reaches the core.
    package func shutDown() -> EventLoopFuture<Void> {
        withdrawal = nil
        handle(rearm: false) { $0.shutDown(now: now(), into: &$1) }
        stopped = true
        timer?.cancel()
        return withdrawal ?? eventLoop.makeSucceededVoidFuture()
    }

    /// Stops as a killed process would: connections close, nothing more reaches the store.
    func crash() {
        stopped = true
        timer?.cancel()
        for writer in frameWriters.values { writer.channel.close(promise: nil) }
    }

    // MARK: Control connections

    /// Gives a new control channel its id; `connectionOpened` then lets the core decide about it
    /// (apart, so the handler knows the id if the core closes the channel at once).
    func add(_ channel: Channel) -> ConnectionID {
        let id = ConnectionID(nextConnection)
        nextConnection += 1
        do {
            frameWriters[id] = try channel.pipeline.syncOperations.context(handlerType: FrameEncoderHandler.self)
        } catch {
            logger.error("a control channel without a frame encoder is closed", metadata: ["error": "\(error)"])
            channel.close(promise: nil)
        }
        return id
    }

    /// Whether a control connection accepted from `peer` is to be closed before it is set up
    /// (the core decides, and counts it).
    func refusesAccepted(from peer: SocketAddress?) -> Bool {
        guard let host = peer?.ipAddress else { return false }
        var refused = false
        handle(rearm: false) { core, output in refused = core.refusesAccepted(from: host, into: &output) }
        return refused
    }

    func connectionOpened(_ id: ConnectionID, peer: SocketAddress?) {
        handle { $0.connectionOpened(id, peer: peer, now: now(), into: &$1) }
    }

    func connectionClosed(_ id: ConnectionID) {
        frameWriters[id] = nil
        readingPaused.remove(id)
        handle { $0.connectionClosed(id, into: &$1) }
        if memoryTrim.connectionClosed() {
            eventLoop.assumeIsolated().scheduleTask(in: .seconds(MemoryTrim.delaySeconds)) { [self] in memoryTrim.trim() }
        }
    }

    func controlFrame(_ payload: ByteBuffer, on id: ConnectionID, peer: SocketAddress) {
        metrics.controlFramesReceived.increment()
        var forwarded = false
        handle(rearm: false) { forwarded = $0.receiptFrameReceived(payload, on: id, now: now(), into: &$1) }
        guard !forwarded else { return }
        do {
            let message = try MessageCodec.decode(payload)
            if message.kind == .datagram {
                counts.datagramsCarriedIn += 1
                metrics.datagramsCarriedIn.increment()
            }
            handle { $0.controlReceived(message, on: id, peer: peer, now: now(), into: &$1) }
        } catch {
            handle { $0.malformedControl(payload, on: id, detail: "\(error)", now: now(), into: &$1) }
        }
    }

    /// A peer announced a frame above the limit.
    func frameTooLarge(on id: ConnectionID, _ error: FrameTooLargeError) {
        handle { $0.frameTooLarge(on: id, announced: error.announcedSize, limit: error.maxFrameSize, into: &$1) }
    }

    /// A control read burst ended: the receipts it routed go out together.
    func flushControl() {
        for encoder in unflushedControl.values { encoder.flush() }
        unflushedControl.removeAll(keepingCapacity: true)
    }

    // MARK: Datagrams

    /// A datagram from `source`, read at `now` (the start of its read burst).
    func datagram(_ bytes: ByteBuffer, from source: SocketAddress, now: NIODeadline) {
        counts.datagramsReceived += 1
        unreportedReceived += 1
        inDatagramBurst = true
        handle(rearm: false) { $0.datagramReceived(bytes, from: source, now: now, into: &$1) }
    }

    func oversizedDatagram(_ bytes: ByteBuffer, from source: SocketAddress) {
        handle { $0.datagramTooLarge(bytes, size: bytes.readableBytes, from: source, now: now(), into: &$1) }
    }

    /// A burst of datagrams read at `start` has been handled and its forwards flushed.
    func datagramBurstCompleted(startedAt start: NIODeadline) {
        inDatagramBurst = false
        if !unflushedControl.isEmpty { flushControl() } // DATAGRAM frames for sessions on the control path
        if latencySampling.observes(burstAt: start) { metrics.forwardLatency.recordNanoseconds((now() - start).nanoseconds) }
        reportDatagramCounts()
    }

    // MARK: Other relays

    /// What the store's subscription brought from other relays.
    func storeEvent(_ event: RelayStoreEvent) {
        switch event {
        case .delivery(let bytes):
            metrics.deliveriesReceived.increment()
            handle { $0.relayDeliveryReceived(bytes, now: now(), into: &$1) }
        case .move(let move):
            handle { $0.userMoved(move, into: &$1) }
        case .malformed(let what):
            handle { $0.relayChannelMalformed(what, into: &$1) }
        case .subscribed:
            handle { core, _ in core.deliveryChannelSubscribed() }
        }
        flushOutsideReads()
    }

    // MARK: Metrics

    /// Brings sampled figures (store round trips, lookups waiting) into the metrics before an export.
    func updateSampledMetrics() {
        let roundTrips = store.roundTrips
        metrics.redisCalls.increment(by: max(0, roundTrips - reportedRoundTrips))
        reportedRoundTrips = max(reportedRoundTrips, roundTrips)
        metrics.datagramsAwaitingLookup.record(core.datagramsAwaitingLookup)
        metrics.sessionsOverControl.record(core.sessionsOverControl)
        metrics.sessionsOverUDP.record(core.sessionCount - core.sessionsOverControl)
        reportDatagramCounts()
    }

    private func reportDatagramCounts() {
        if unreportedReceived > 0 { metrics.datagramsReceived.increment(by: Int64(unreportedReceived)) }
        if unreportedForwarded > 0 { metrics.datagramsForwarded.increment(by: Int64(unreportedForwarded)) }
        unreportedReceived = 0
        unreportedForwarded = 0
    }

    // MARK: Actions

    private func perform(_ action: RelayAction) {
        if stopped {
            if case .close(let id) = action { frameWriters[id]?.channel.close(promise: nil) }
            return
        }
        switch action {
        case .send(let id, let message):
            guard let encoder = frameWriters[id] else { return }
            let channel = encoder.channel
            guard message.kind == .receipt else { return channel.writeAndFlush(message, promise: nil) }
            counts.receiptsRouted += 1
            metrics.receiptsRouted.increment()
            channel.write(message, promise: nil) // flushed when the read (or store answer) is handled
            unflushedControl[id] = encoder
        case .forward(let id, let payload):
            guard let encoder = frameWriters[id] else { return }
            let channel = encoder.channel
            counts.receiptsRouted += 1
            metrics.receiptsRouted.increment()
            var frame = channel.allocator.buffer(capacity: Framing.headerSize + payload.readableBytes)
            Framing.writeFrame(payload: payload, into: &frame)
            encoder.write(NIOAny(frame), promise: nil) // a whole frame already
            unflushedControl[id] = encoder
        case .deliver(_, let bytes, let address):
            counts.datagramsForwarded += 1
            unreportedForwarded += 1
            writeDatagram(bytes, to: address)
        case .reply(let bytes, let address):
            writeDatagram(bytes, to: address)
        case .carry(let id, let sealed):
            guard let encoder = frameWriters[id] else { return }
            let channel = encoder.channel
            counts.datagramsCarriedOut += 1
            metrics.datagramsCarriedOut.increment()
            var frame = channel.allocator.buffer(capacity: Framing.headerSize + 16 + sealed.readableBytes)
            Framing.writeDatagramFrame(carrying: sealed, into: &frame)
            encoder.write(NIOAny(frame), promise: nil) // a whole frame already
            unflushedControl[id] = encoder
        case .close(let id):
            frameWriters[id]?.channel.close(promise: nil)
        case .pauseReading(let id):
            readingPaused.insert(id)
            updateReading(id)
        case .resumeReading(let id):
            readingPaused.remove(id)
            updateReading(id)
        case .reject(let reason, let detail):
            counts.rejected[reason, default: 0] += 1
            metrics.rejected(reason)
            let level: Logger.Level = reason.isWorthNotice ? .notice : .debug
            logger.log(level: level, "rejected input", metadata: ["reason": "\(reason.rawValue)", "detail": "\(detail)"])
        case .store(let request):
            let answered = ask(request)
            if case .withdraw = request { withdrawal = answered }
        case .drained:
            drained?.succeed()
            drained = nil
        case .event(let event):
            report(event)
        }
    }

    /// Reads connection `id` only while the core lets it and its client reads what it is sent
    /// (its channel is writable): a client that does not read its answers is not read either.
    func updateReading(_ id: ConnectionID) {
        guard let channel = frameWriters[id]?.channel else { return }
        try? channel.syncOptions?.setOption(ChannelOptions.autoRead, value: channel.isWritable && !readingPaused.contains(id))
    }

    /// Sends `request` to the store; its answer goes back to the core. The future completes
    /// with the store's answer (for `shutDown`, which waits for the withdrawal).
    @discardableResult
    private func ask(_ request: StoreRequest) -> EventLoopFuture<Void> {
        noteRequest(request)
        let answer = store.perform(request, on: eventLoop)
        answer.hop(to: eventLoop).assumeIsolated().whenComplete { [self] result in
            guard !stopped else { return }
            switch result.mapError({ $0 as? StoreFailure ?? StoreFailure("\($0)") }) {
            case .success(let answer):
                noteAnswer(answer)
                handle { $0.storeAnswered(answer, now: now(), into: &$1) }
            case .failure(let failure):
                metrics.redisErrors.increment()
                logger.warning("store request failed", metadata: ["request": "\(request.name)", "error": "\(failure)"])
                handle { $0.storeFailed(request, failure, now: now(), into: &$1) }
            }
            flushOutsideReads()
        }
        return answer.map { _ in }
    }

    private func writeDatagram(_ bytes: ByteBuffer, to address: SocketAddress) {
        // The envelope is built where it is wrapped: one shared between the two branches was
        // copied into the `NIOAny` and destroyed after (about 250 instructions a datagram).
        if let datagramWriter {
            datagramWriter.write(NIOAny(AddressedEnvelope(remoteAddress: address, data: bytes)), promise: nil)
        } else {
            datagramChannel?.write(AddressedEnvelope(remoteAddress: address, data: bytes), promise: nil)
        }
        guard !inDatagramBurst, !datagramFlushScheduled else { return }
        // Outside a read burst: flushed once at the end of this event-loop turn.
        datagramFlushScheduled = true
        eventLoop.assumeIsolated().execute { [self] in
            datagramFlushScheduled = false
            datagramChannel?.flush()
        }
    }

    /// Work that did not come from a read (a store answer, a timer, another relay) flushes what
    /// it wrote on control channels; datagrams go out at the end of the turn.
    private func flushOutsideReads() {
        flushControl()
        reportDatagramCounts()
    }

    /// Keeps one scheduled task at the core's next deadline.
    private func armTimer() {
        guard !stopped else { return }
        let deadline = core.nextDeadline
        if let armed = timerDeadline, armed <= deadline { return }
        timer?.cancel()
        timerDeadline = deadline
        timer = eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            timer = nil
            timerDeadline = nil
            core.anchorWallClock(WallClock.millisecondsSinceEpoch(), at: now()) // access tokens' times are wall-clock times
            handle { $0.tick(now: now(), into: &$1) }
            flushOutsideReads()
        }
    }
}
