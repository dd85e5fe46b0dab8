import NIOCore
import NIOPosix
import SIMPCore

/// An open-loop load generator: `pairs` sender/receiver pairs registered with a relay; during
/// a window the senders offer messages at a fixed total rate whether or not receipts come
/// back, so a slow relay shows up as latency and loss instead of a lower send rate.
///
/// Everything runs on one event loop, so the pairs need no locks.
public final class LoadGenerator: @unchecked Sendable { // confined to loop
    public struct Parameters: Sendable {
        public var host = "127.0.0.1"
        public var port = 7600
        /// Control ports of further relays on the same host and Redis. With any, pair n's
        /// sender registers at relay n mod N and its receiver at relay (n+1) mod N (N relays
        /// in all), so every message crosses from one relay to another.
        public var extraPorts: [Int] = []
        /// Every relay's control port, `port` first.
        public var relayPorts: [Int] { [port] + extraPorts }
        /// Address the bench's own sockets bind to.
        public var localHost = "127.0.0.1"
        public var pairs = 1
        /// The number of this generator's first pair (pair n is `<prefix>-n-a` → `<prefix>-n-b`
        /// and picks its relays by n): generators that share a run and a prefix count on.
        public var firstPair = 0
        /// Encoded size of each datagram, bytes.
        public var size = 200
        /// User ids are `<prefix>-<n>-a` (sender) and `<prefix>-<n>-b` (receiver).
        public var userPrefix = "bench-\(UInt32.random(in: .min ... .max))"
        public var policy = RetransmitPolicy()
        /// Messages a pair may have without receipt or failure before its next offer is skipped
        /// (0: no limit). Like an MQTT client's inflight window, it keeps an overloaded run
        /// from piling up unbounded retransmission state; skipped offers make the run count as
        /// not sustained.
        public var window = 100
        /// Receivers send one receipt per sender and read burst (docs/PROTOCOL.md §6.1);
        /// false: one per message.
        public var batchesReceipts = true
        /// Messages sent per timer tick. 1 (the default) spreads them evenly: each message is
        /// sent at its own time, 1/rate apart (ticks no shorter than `minimumTick`, so above
        /// 20,000 msg/s a tick carries several). Larger values send that many in one
        /// `sendmmsg` per tick (the bench before spreading sent about 8), which makes the
        /// messages of a tick queue behind each other in the relay.
        public var messagesPerTick = 1
        /// How long receivers hold receipts for others to the same sender (checked every tick),
        /// so one batch covers more messages; the receipts' hold time tells the senders. The
        /// default is the reference client's (`ReceiptBatcher.defaultDelay`); zero sends them at
        /// the end of each read burst.
        public var receiptDelay = ReceiptBatcher.defaultDelay
        /// Receivers also send each receipt frame as a sealed datagram to their relay, which
        /// forwards it to the sender (docs/PROTOCOL.md §6.1, "The datagram copy"), as the
        /// reference client does; the sender acts on whichever copy arrives first.
        public var receiptDatagrams = true
        /// Every pair's datagrams (content, receipt copies, HELLO) go in DATAGRAM frames on its
        /// users' control connections, and the relay sends theirs the same way
        /// (docs/PROTOCOL.md §5.5): the path of clients whose network blocks UDP.
        public var tcpPath = false
        /// The shortest timer tick the generator schedules.
        public static let minimumTick = TimeAmount.microseconds(50)
        public init() {}
    }

    private enum Phase { case idle, warmup, measuring, draining }

    public let parameters: Parameters
    private let group: MultiThreadedEventLoopGroup
    private let loop: EventLoop
    private var pairs: [BenchPair] = []
    private var phase = Phase.idle
    private var result = LoadResult(targetRate: 0, seconds: 0)
    private var outstandingMeasured = 0
    /// One UDP socket for every sender and one for every receiver (a registration needs a
    /// port, not a socket of its own): a tick's datagrams leave in one flush (`sendmmsg`), and a
    /// burst of arrivals is read 64 at a time (`recvmmsg`) with one wake-up.
    private var senderSocket: Channel!
    private var receiverSocket: Channel!
    /// Receivers and senders by their session id, which every datagram the relay seals for
    /// them carries.
    private var pairsByReceiverSession: [UInt64: BenchPair] = [:]
    private var pairsBySenderSession: [UInt64: BenchPair] = [:]
    /// Receipt datagrams written to `receiverSocket` and not flushed yet.
    private var receiptDatagramsPending = false
    /// Receivers whose receipts were written during the current burst of arrivals.
    private var receiptsToFlush: [BenchPair] = []
    /// On the TCP path: senders whose control connections have frames written and not flushed.
    private var sendersToFlush: [BenchPair] = []

    public init(parameters: Parameters) {
        self.parameters = parameters
        self.group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        self.loop = group.next()
    }

    /// Binds the two UDP sockets, then registers every pair's two users.
    public func connect() async throws {
        try await loop.flatSubmit { [self] in
            let receiverHandler = BenchDatagramHandler(
                onDatagram: { [unowned self] in receiverDatagram($0) },
                onReadComplete: { [unowned self] in flushReceipts() })
            // Receipt datagrams come back to the senders' socket.
            let senderHandler = BenchDatagramHandler(
                onDatagram: { [unowned self] in senderDatagram($0) },
                onReadComplete: { [unowned self] in senderSocket.flush() })
            return BenchConnector.bindDatagramSocket(host: parameters.localHost, handler: senderHandler, on: loop)
                .and(BenchConnector.bindDatagramSocket(host: parameters.localHost, handler: receiverHandler, on: loop))
                .flatMap { [self] senderUDP, receiverUDP in
                    senderSocket = senderUDP
                    receiverSocket = receiverUDP
                    pairs = (parameters.firstPair..<parameters.firstPair + parameters.pairs).map {
                        BenchPair(index: $0, prefix: parameters.userPrefix, policy: parameters.policy, receiptDelay: parameters.receiptDelay)
                    }
                    return EventLoopFuture.andAllSucceed(pairs.map(connect), on: loop)
                }
        }.get()
    }

    private func connect(_ pair: BenchPair) -> EventLoopFuture<Void> {
        pair.sizeContent(toEncodedSize: parameters.size)
        pair.senderDatagrams = senderSocket
        pair.tcpPath = parameters.tcpPath
        let senderControl = BenchControlHandler()
        senderControl.onMessage = { [unowned self, unowned pair] message in
            if message.kind == .datagram { return senderDatagram(ByteBuffer(bytes: message.datagram)) }
            senderControlMessage(message, pair)
        }
        senderControl.onReadComplete = { [unowned self] in flushSenders() }
        let receiverControl = BenchControlHandler()
        if parameters.tcpPath {
            receiverControl.onMessage = { [unowned self] message in
                if message.kind == .datagram { receiverDatagram(ByteBuffer(bytes: message.datagram)) }
            }
            receiverControl.onReadComplete = { [unowned self] in flushReceipts() }
        }
        let ports = parameters.relayPorts
        let a = BenchConnector.register(
            user: pair.from, udpPort: senderSocket.localAddress!.port!, host: parameters.host,
            port: ports[pair.index % ports.count], handler: senderControl, on: loop)
        let b = BenchConnector.register(
            user: pair.to, udpPort: receiverSocket.localAddress!.port!, host: parameters.host,
            port: ports[(pair.index + 1) % ports.count], handler: receiverControl, on: loop)
        return a.and(b)
            .assumeIsolated()
            .map { [self] sender, receiver in
                pair.senderControl = sender.control
                pair.receiverControl = receiver.control
                pair.relayAddress = sender.relayDatagramAddress
                pair.sealer = DatagramSealer(keys: sender.keys, direction: .uplink)
                pair.opener = DatagramOpener(keys: receiver.keys, direction: .downlink)
                pair.receiptSealer = DatagramSealer(keys: receiver.keys, direction: .uplink)
                pair.receiptOpener = DatagramOpener(keys: sender.keys, direction: .downlink)
                pair.receiverRelayAddress = receiver.relayDatagramAddress
                pair.receiverMaxDatagramSize = receiver.maxDatagramSize
                pair.relayBatchesReceipts = receiver.relayBatchesReceipts
                pairsByReceiverSession[receiver.keys.sessionId] = pair
                pairsBySenderSession[sender.keys.sessionId] = pair
                if parameters.tcpPath { pair.moveToTCPPath() }
            }
            .nonisolated()
    }

    /// Offers `rate` messages per second in total for `warmup` (not counted), then for
    /// `duration` (counted), then waits up to `drain` for the window's last receipts.
    /// `atWindowEdge` is called with `true` when counting starts and `false` when it stops.
    /// The schedule starts at `start` (default: now), so generators given the same `start`
    /// measure the same window.
    public func measure(
        rate: Double, duration: TimeAmount, warmup: TimeAmount, drain: TimeAmount = .seconds(2), start: NIODeadline? = nil,
        atWindowEdge: @escaping @Sendable (_ starts: Bool) -> Void = { _ in }
    ) async throws -> LoadResult {
        precondition(rate > 0 && duration > .zero)
        let done = loop.makePromise(of: LoadResult.self)
        let start = start ?? .now()
        loop.execute { [self] in
            run(rate: rate, duration: duration, warmup: warmup, drain: drain, start: start, edge: atWindowEdge, done: done)
        }
        return try await done.futureResult.get()
    }

    /// Closes every connection (the relay removes the registrations).
    public func close() async {
        try? await loop.submit { [self] in
            for pair in pairs { pair.close() }
            senderSocket?.close(promise: nil)
            receiverSocket?.close(promise: nil)
        }.get()
        try? await group.shutdownGracefully()
    }

    // MARK: On the loop

    private func run(
        rate: Double, duration: TimeAmount, warmup: TimeAmount, drain: TimeAmount, start: NIODeadline,
        edge: @escaping (Bool) -> Void, done: EventLoopPromise<LoadResult>
    ) {
        result = LoadResult(targetRate: rate, seconds: Double(duration.nanoseconds) / 1e9)
        outstandingMeasured = 0
        let retransmitsBefore = pairs.reduce(0) { $0 + $1.sender.retransmits }
        // `messagesPerTick` messages per tick, between 50 µs and 1 ms apart.
        let perTick = Double(max(1, parameters.messagesPerTick))
        let tick = TimeAmount.nanoseconds(Int64(min(1e6, max(Double(Parameters.minimumTick.nanoseconds), perTick * 1e9 / rate))))
        let windowStart = start + warmup, windowEnd = windowStart + duration
        var offered = 0, next = 0, ticks = 0
        phase = .warmup
        func step(_ task: RepeatedTask) {
            let now = NIODeadline.now()
            ticks += 1
            if phase == .warmup, now >= windowStart {
                phase = .measuring
                edge(true)
            }
            if phase == .measuring, now >= windowEnd {
                phase = .draining
                edge(false)
            }
            if phase != .draining {
                let due = Int(Double((now - start).nanoseconds) / 1e9 * rate) + 1
                if due - offered > 1 {
                    let lag = TimeAmount.nanoseconds(Int64(Double(due - offered - 1) / rate * 1e9))
                    if phase == .measuring { result.generatorMaxLag = max(result.generatorMaxLag, lag) }
                }
                let offeredBefore = offered
                while offered < due {
                    if parameters.window == 0 || pairs[next].offers.count < parameters.window {
                        offer(pairs[next])
                    } else if phase == .measuring {
                        result.skipped += 1
                    }
                    next = (next + 1) % pairs.count
                    offered += 1
                }
                if offered > offeredBefore { flushSenders() }
            }
            if parameters.receiptDelay > .zero, !receiptsToFlush.isEmpty { flushReceipts() }
            if ticks % max(1, Int(10_000_000 / tick.nanoseconds)) == 0 { pollRetransmits(now: now) }
            if phase == .draining, outstandingMeasured == 0 || now >= windowEnd + drain {
                task.cancel()
                result.unresolved = outstandingMeasured
                result.retransmits = pairs.reduce(0) { $0 + $1.sender.retransmits } - retransmitsBefore
                result.smoothedRTT = LoadResult.mean(pairs.compactMap(\.sender.estimator.smoothedRTT))
                phase = .idle
                done.succeed(result)
            }
        }
        let loopStep = NIOLoopBound(step, eventLoop: loop)
        loop.scheduleRepeatedTask(initialDelay: max(.zero, start - .now()), delay: tick) { loopStep.value($0) }
    }

    /// Hands one message to its sender's core and writes it; its latency counts from here (the
    /// clock is read per message, so a tick's later messages do not carry its earlier ones' time).
    private func offer(_ pair: BenchPair) {
        let now = NIODeadline.now()
        let message = SIMPMessage(kind: .text, fromUser: pair.from, toUser: pair.to, content: pair.content, time: 0)
        let (id, output) = pair.sender.submit(message, now: now)
        let measured = phase == .measuring
        pair.offers[id] = BenchPair.Offer(at: now, measured: measured)
        if measured {
            result.offered += 1
            outstandingMeasured += 1
        }
        write(output.transmit, pair)
        record(output.events, pair)
    }

    private func pollRetransmits(now: NIODeadline) {
        for pair in pairs {
            guard let deadline = pair.sender.nextDeadline, deadline <= now else { continue }
            let output = pair.sender.poll(now: now)
            write(output.transmit, pair)
            record(output.events, pair)
        }
        flushSenders()
    }

    /// A receipt datagram for a sender: the copy of a receipt frame (§6.1); whichever copy
    /// comes first settles the message, the other finds it no longer pending.
    private func senderDatagram(_ bytes: ByteBuffer) {
        guard let session = SealedDatagram.sessionId(of: bytes), let pair = pairsBySenderSession[session],
            let payload = try? pair.receiptOpener.open(bytes).payload, let message = try? MessageCodec.decode(payload),
            message.kind == .receipt
        else { return }
        if phase == .measuring { result.receiptDatagramsArrived += 1 }
        senderControlMessage(message, pair, viaDatagram: true)
    }

    /// Writes a sender's transmissions (flushed by `flushSenders`).
    private func write(_ transmissions: [SIMPMessage], _ pair: BenchPair) {
        guard !transmissions.isEmpty else { return }
        pair.write(transmissions)
        if pair.tcpPath, !pair.senderFramesPending {
            pair.senderFramesPending = true
            sendersToFlush.append(pair)
        }
    }

    /// Sends what the senders wrote: one flush of the shared UDP socket (`sendmmsg`), or on the
    /// TCP path one flush per sender connection written to.
    private func flushSenders() {
        guard parameters.tcpPath else { return senderSocket.flush() }
        for pair in sendersToFlush {
            pair.senderControl.flush()
            pair.senderFramesPending = false
        }
        sendersToFlush.removeAll(keepingCapacity: true)
    }

    private func senderControlMessage(_ message: SIMPMessage, _ pair: BenchPair, viaDatagram: Bool = false) {
        let now = NIODeadline.now()
        switch message.kind {
        case .receipt:
            let output = pair.sender.handleReceipt(message, now: now)
            write(output.transmit, pair)
            record(output.events, pair, viaDatagram: viaDatagram)
        case .error where message.messageId != 0:
            let output = pair.sender.handleRejection(
                messageId: message.messageId, code: message.errorCode,
                reason: message.errorText, now: now)
            write(output.transmit, pair)
            record(output.events, pair)
        default:
            break
        }
    }

    private func receiverDatagram(_ bytes: ByteBuffer) {
        let now = NIODeadline.now()
        guard let session = SealedDatagram.sessionId(of: bytes), let pair = pairsByReceiverSession[session],
            let payload = try? pair.opener.open(bytes).payload, let message = try? MessageCodec.decode(payload),
            message.kind.isContent
        else { return }
        let outcome = pair.receiver.receive(message, arrivedAt: now, now: now)
        for receipt in outcome.receipts {
            if parameters.batchesReceipts, pair.relayBatchesReceipts, ReceiptBatcher.isBatchable(receipt) {
                if let full = pair.receiptBatcher.add(receipt, now: now) { writeReceipt(full, pair, now: now) }
            } else {
                writeReceipt(receipt, pair, now: now)
            }
        }
        if !pair.receiptsPending {
            pair.receiptsPending = true
            receiptsToFlush.append(pair)
        }
        guard outcome.verdict == .deliver else {
            if phase == .measuring { result.suppressed += 1 }
            return
        }
        // An arrival may release messages held for order; each counts when the application gets it.
        for delivered in outcome.deliver {
            if !pair.deliveredIds.insert(delivered.messageId), phase == .measuring { result.duplicates += 1 }
            if phase == .measuring { result.delivered += 1 }
            guard let offer = pair.offers[delivered.messageId], offer.measured else { continue }
            result.latency.record(now - offer.at)
        }
    }

    /// Writes a receipt frame and, like the reference client, its datagram copy
    /// (`ClientSession.hasDatagramCopy`), which repeats the previous batch's ids (`ReceiptRepeater`).
    private func writeReceipt(_ receipt: SIMPMessage, _ pair: BenchPair, now: NIODeadline) {
        pair.receiverControl.write(receipt, promise: nil)
        if phase == .measuring { result.receiptFrames += 1 }
        let maxDatagramSize = pair.receiverMaxDatagramSize
        guard parameters.receiptDatagrams, ClientSession.hasDatagramCopy(receipt, maxDatagramSize: maxDatagramSize) else { return }
        let copy =
            parameters.batchesReceipts && pair.relayBatchesReceipts
            ? pair.receiptRepeater.datagramCopy(of: receipt, now: now, maxDatagramSize: maxDatagramSize) : receipt
        let bytes = pair.receiptSealer.seal(copy, allocator: receiverSocket.allocator)
        if pair.tcpPath {
            pair.receiverControl.write(SIMPMessage.carrying(bytes), promise: nil) // flushed with the receipt frame
        } else {
            receiverSocket.write(AddressedEnvelope(remoteAddress: pair.receiverRelayAddress, data: bytes), promise: nil)
            receiptDatagramsPending = true
        }
        if phase == .measuring { result.receiptDatagrams += 1 }
    }

    /// Sends the receipts made during a burst of arrivals: one batch (or the single receipts)
    /// and one flush per receiver. With a `receiptDelay`, a receiver whose oldest receipt is
    /// younger than that keeps them for a later call (every tick).
    private func flushReceipts() {
        let now = NIODeadline.now()
        var waiting: [BenchPair] = []
        for pair in receiptsToFlush {
            if parameters.receiptDelay > .zero, let deadline = pair.receiptBatcher.nextDeadline, deadline > now {
                waiting.append(pair)
                continue
            }
            for batch in pair.receiptBatcher.flush(now: now) { writeReceipt(batch, pair, now: now) }
            pair.receiverControl.flush()
            pair.receiptsPending = false
        }
        receiptsToFlush = waiting
        if receiptDatagramsPending {
            receiptDatagramsPending = false
            receiverSocket.flush()
        }
    }

    /// Counts receipts and failures; a message is resolved by its sender's event.
    private func record(_ events: [SenderEvent], _ pair: BenchPair, viaDatagram: Bool = false) {
        for event in events {
            switch event {
            case .delivered(let id, _, let latency, _):
                if phase == .measuring {
                    result.receipts += 1
                    if viaDatagram { result.receiptsFirstByDatagram += 1 }
                }
                guard pair.offers.removeValue(forKey: id)?.measured == true else { continue }
                outstandingMeasured -= 1
                result.receiptRTT.record(latency)
            case .failed(let id, _, _):
                guard pair.offers.removeValue(forKey: id)?.measured == true else { continue }
                outstandingMeasured -= 1
                result.failed += 1
            }
        }
    }
}
