import Logging
import NIOCore
import NIOEmbedded
import SIMPClient
import SIMPCore
import SIMPTestKit

/// A client in the simulator: the production client — `ClientEngine` and its channel handlers,
/// driving the client's `ClientSession` — on an `EmbeddedEventLoop` whose clock is the
/// simulation's. Its control connections and its UDP socket are `EmbeddedChannel`s whose bytes
/// the simulated links carry (`SimConnection`, `SimLink`); every event that reaches the client
/// first moves its loop to the event's instant, and each task the engine schedules gets an
/// event at its deadline, so the engine's timers fire in virtual time. Its process can stop
/// (`stop`) and start again afresh (`start`), as a device that goes offline and comes back.
final class SimClient {
    let user: String
    let isSender: Bool
    /// The device it logs in as (PROTOCOL §4.7; "" is the user's default device).
    let device: String
    /// A send-only session: never a route for content, never gets stored messages.
    let sendOnly: Bool
    let ipAddress: String
    let up: SimLink
    let down: SimLink
    unowned let world: SimWorld
    /// The engine of the running process (or of the last one), and its loop.
    var engine: ClientEngine!
    private var loop: EmbeddedEventLoop!
    private var random: SeededRandom
    /// The control connection the running process opened last (its registered one, or one
    /// still logging in).
    private var latestConnection: SimConnection?
    /// Whether the client has been registered (and published its keys) at least once.
    var hasConnected = false
    /// The UDP port registered with the relay (a new process binds a new one).
    private var registeredPort = 50_000
    /// The UDP port the relay's datagrams reach now (changes on a NAT rebinding).
    private(set) var publicPort = 50_000
    /// Messages without an outcome yet, with when they were submitted.
    private var waiters: [UInt64: TimeAmount] = [:]
    /// The sender's retransmission count already passed to the recorder.
    private var retransmitsRecorded = 0
    /// Whether the application took messages since progress was last noted.
    private var messagesTaken = false
    let index: Int
    /// Whether the client's process runs, and how many processes it has had: what a stopped
    /// process scheduled (timers, reconnects, datagrams on their way to it) is ignored.
    private(set) var isRunning = false
    private(set) var processes = 0
    /// Stop once every submitted message has its outcome (a one-shot send).
    var leavesWhenDone = false
    /// Whether the running process has published its end-to-end key bundle (at its first
    /// registration, as `SIMPClient.connect` does); only then does the client count as connected.
    var keysPublished = false
    /// Messages the application typed and has not submitted yet, oldest first: waiting for the
    /// process to publish its keys, or for the engine to take the one before (`submitNext`).
    var typed: [(text: String, to: String)] = []
    /// Whether the engine is taking a message now (they are submitted one at a time, in order).
    var submitting = false
    /// Messages the engine did not take (their process ended first, or it refused them).
    var unsubmitted: UInt64 = 0
    /// Where the client's control connections go (the relay's end is `SimRelay`'s).
    private static let relayAddress = try! SocketAddress(ipAddress: "10.255.255.1", port: 7600)
    /// Milliseconds since the epoch that virtual time zero stands for (messages' `time`).
    private static let epochMillis: Int64 = 1_700_000_000_000

    init(
        user: String, isSender: Bool, device: String = "", sendOnly: Bool = false, index: Int, up: SimLink, down: SimLink,
        world: SimWorld
    ) {
        self.user = user
        self.isSender = isSender
        self.device = device
        self.sendOnly = sendOnly
        self.index = index
        self.ipAddress = "10.\(index / 65_536 % 256).\(index / 256 % 256).\(index % 256)"
        self.up = up
        self.down = down
        self.world = world
        self.random = SeededRandom(seed: world.seed, stream: 1_000_000 + UInt64(index))
        makeEngine(firstMessageId: UInt64(index) << 32)
    }

    /// A new process's engine on a loop of its own, at the simulation's time.
    private func makeEngine(firstMessageId: UInt64) {
        let loop = EmbeddedEventLoop()
        loop.advanceTime(to: world.queue.deadline - .nanoseconds(1))
        var configuration = world.configuration
        configuration.user = user
        configuration.device = device
        configuration.sendOnly = sendOnly
        configuration.retransmit = world.scenario.policy
        configuration.batchesReceipts = true // as the reference client: batches that wait up to 10 ms
        configuration.advertisedUDPPort = registeredPort
        configuration.logger = Logger(label: "simp.lab.client") { _ in SwiftLogNoOpLogHandler() }
        let environment = ClientEngine.Environment(
            connect: { [unowned self] _, _, initialize in connect(initialize) },
            now: { [unowned world] in world.queue.deadline },
            wallClockMillis: { [unowned world] in Self.epochMillis + world.queue.now.nanoseconds / 1_000_000 },
            random: { [unowned self] in random.unit() }, firstMessageId: firstMessageId,
            taskScheduled: { [unowned self, unowned loop] deadline in taskScheduled(at: deadline, on: loop) },
            entropy: .seeded(random.next())) // keys, nonces and ratchets replay with the seed
        let engine = ClientEngine(configuration: configuration, eventLoop: loop, environment: environment)
        engine.onMessage = { [unowned self] in take($0) }
        engine.onNotice = { [unowned self] in noticeArrived($0) }
        engine.onOutput = { [unowned self] output in
            if let path = output.pathChanged { world.recorder.pathChanged(toControl: path == .control, at: world.elapsed) }
            outputReported()
        }
        engine.onStateChange = { [unowned self] state in
            guard case .connected = state else { return }
            registered()
        }
        let datagrams = EmbeddedChannel(loop: loop)
        try! datagrams.pipeline.syncOperations.addHandler(
            OutboundTap<AddressedEnvelope<ByteBuffer>>(written: { [unowned self] in sendUp($0.data) }))
        try! datagrams.pipeline.syncOperations.addHandler(ClientDatagramHandler(engine: engine))
        engine.datagrams = datagrams
        self.engine = engine
        self.loop = loop
        startEndToEnd()
    }

    /// The client's retransmission counters.
    var sender: ReliableSender { engine.session.sender }
    /// Moves of the datagram path, both ways, of the running (or last) process.
    var pathSwitches: Int { engine.session.pathSwitches.toControl + engine.session.pathSwitches.toUDP }
    var publicAddress: SocketAddress { try! SocketAddress(ipAddress: ipAddress, port: publicPort) }
    var isConnected: Bool { engine.control != nil }
    /// The registered control connection.
    var control: SimConnection? {
        guard let channel = engine.control, let latestConnection, latestConnection.clientEnd === channel else { return nil }
        return latestConnection
    }
    var outstanding: Int { waiters.count + typed.count + (isRunning ? engine.session.receiver.heldCount : 0) }

    // MARK: Process

    /// The client's process starts and connects (a failed attempt is retried as the session
    /// plans). A process after the first is a new one: a fresh engine (ids, receiver state) and
    /// a new UDP port.
    func start() {
        guard !isRunning else { return }
        if processes > 0 {
            world.addressChanged(of: self) { publicPort += 1 }
            registeredPort = publicPort
            makeEngine(firstMessageId: UInt64(index) << 32 | UInt64(processes) << 24)
            retransmitsRecorded = 0
        }
        processes += 1
        isRunning = true
        drive { engine.connectOrRetry() }
    }

    /// The client's process stops: it says DISCONNECT on its control connection (TCP still
    /// delivers what was written before, receipts included) and is gone; what it held back is
    /// lost with it. The relay closes the connection on the DISCONNECT.
    func stop() {
        guard isRunning else { return }
        isRunning = false // first: nothing the ending process schedules is followed
        abandonTyped()
        drive {
            // As the reference client closes: receipts still waiting in a batch go out before
            // the DISCONNECT (else the relay would deliver those messages to the next process again).
            engine.finishTakingMessages()
            if let control = engine.control {
                control.writeAndFlush(SIMPMessage(kind: .disconnect, fromUser: user), promise: nil)
            } else if let handshake = latestConnection?.clientEnd, handshake.isActive {
                handshake.close(promise: nil)
            }
        }
        latestConnection = nil
        world.noteProgress()
    }

    /// Moves the loop to the simulation's time, does `work` there, and lets the loop run what
    /// it started. Tasks due at this very instant are left to their own events (`runDueTasks`),
    /// so that inputs and timers of one instant take turns in the order the simulation
    /// scheduled them.
    func drive(_ work: () -> Void) {
        loop.advanceTime(to: world.queue.deadline - .nanoseconds(1))
        work()
        loop.run()
    }

    /// Runs the engine's tasks due now.
    private func runDueTasks() {
        loop.advanceTime(to: world.queue.deadline)
    }

    /// The engine scheduled a task at `deadline` on `taskLoop`: an event then moves the loop on
    /// to it (unless the process that scheduled it has ended).
    private func taskScheduled(at deadline: NIODeadline, on taskLoop: EmbeddedEventLoop) {
        guard isRunning, taskLoop === loop else { return }
        world.queue.schedule(at: world.queue.time(of: deadline)) { [unowned self] in
            if isRunning, taskLoop === loop { runDueTasks() }
        }
    }

    // MARK: Connecting (the engine's `Environment.connect`)

    /// Opens a control connection: the engine's channel, over a `SimConnection` to the relay.
    /// It fails after the connect timeout while a blackout covers the link, and one round trip
    /// later while the relay is down (connection refused).
    private func connect(_ initialize: @escaping @Sendable (Channel) -> EventLoopFuture<Void>) -> EventLoopFuture<Channel> {
        guard !up.isDown, !down.isDown else { return failedConnect(after: world.configuration.connectTimeout) }
        guard let connection = world.relay.open(for: self) else { return failedConnect(after: up.meanDelay + down.meanDelay) }
        let channel = EmbeddedChannel(loop: loop)
        try! channel.pipeline.syncOperations.addHandler(
            OutboundTap<ByteBuffer>(
                written: { [unowned connection] in connection.up.send($0) },
                closed: { [unowned self, unowned connection] in clientEndClosed(connection) }))
        connection.clientEnd = channel
        connection.clientProcess = processes
        latestConnection = connection
        return initialize(channel).map {
            channel.connect(to: Self.relayAddress, promise: nil)
            return channel
        }
    }

    private struct ConnectFailed: Error {}

    private func failedConnect(after delay: TimeAmount) -> EventLoopFuture<Channel> {
        let promise = loop.makePromise(of: Channel.self)
        let loop = loop!
        world.queue.schedule(after: delay) { [unowned self] in
            guard loop === self.loop else { return promise.fail(ConnectFailed()) } // an ended process's attempt
            drive { promise.fail(ConnectFailed()) }
        }
        return promise.futureResult
    }

    /// The engine closed its end of `connection`; the relay learns it one link delay later
    /// (unless the relay closed it first).
    private func clientEndClosed(_ connection: SimConnection) {
        guard !connection.isClosed else { return }
        world.relay.clientClosed(connection)
    }

    /// The NAT in front of this client maps it to a new public port.
    func rebind() {
        world.addressChanged(of: self) { publicPort += 1 }
    }

    /// The application sends `text` to `user`: submitted to the engine once the process has
    /// published its keys and the engine took the messages typed before (`submitNext`).
    func submit(text: String, to user: String) {
        typed.append((text, user))
        drive { submitNext() }
    }

    /// The engine took message `id` (sealed and sent, or held for its receiver's keys).
    func submitted(id: UInt64, to: String, text: String, outcome: EventLoopFuture<SendResult>) {
        waiters[id] = world.queue.now
        world.recorder.messageSent(id: id, from: user, to: to, text: text, at: world.elapsed)
        outcome.assumeIsolated().whenSuccess { [unowned self] in messageSettled($0) }
    }

    // MARK: Input

    /// A datagram from the relay enters this client's downlink (to the process running now).
    func receiveFromRelay(_ bytes: ByteBuffer) {
        let process = processes
        down.send(bytes) { [unowned self] bytes in
            guard isRunning, process == processes, let datagrams = engine.datagrams as? EmbeddedChannel else { return }
            // Each simulated arrival is a read burst of its own.
            drive { try! datagrams.writeInbound(AddressedEnvelope(remoteAddress: Self.relayAddress, data: bytes)) }
        }
    }

    /// Bytes the relay wrote on `connection` reached the client's end.
    func controlBytesArrived(_ bytes: ByteBuffer, on connection: SimConnection) {
        guard isRunning, connection.clientProcess == processes, let channel = connection.clientEnd, channel.isActive else { return }
        drive { _ = try? channel.writeInbound(bytes) }
    }

    /// The relay closed `connection`; the client's end closes (its engine takes it from there).
    func connectionClosed(_ connection: SimConnection) {
        guard isRunning, connection.clientProcess == processes, let channel = connection.clientEnd, channel.isActive else { return }
        drive { channel.close(promise: nil) }
    }

    // MARK: What the application sees

    /// The application takes every message (the recorder finds duplicates); progress is noted
    /// once the output is reported (`outputReported`).
    private func take(_ message: SIMPMessage) -> Bool {
        world.recorder.handedOver(endToEnd: message.isEndToEnd)
        world.recorder.appReceived(from: message.fromUser, to: user, device: device, text: message.content, at: world.elapsed)
        messagesTaken = true
        return true
    }

    /// Datagrams up the link to the relay, from the NAT mapping in force as they leave.
    private func sendUp(_ datagram: ByteBuffer) {
        let source = publicAddress
        up.send(datagram) { [unowned self] bytes in
            world.relay.datagramArrived(bytes, from: source)
        }
    }

    private func outputReported() {
        if messagesTaken {
            messagesTaken = false
            world.noteProgress()
        }
        if engine.session.sender.retransmits > retransmitsRecorded {
            world.recorder.retransmitted(engine.session.sender.retransmits - retransmitsRecorded, at: world.elapsed)
            retransmitsRecorded = engine.session.sender.retransmits
        }
    }

    /// A stored message has its outcome when the relay says it was delivered from the inbox
    /// (or discarded), as in real mode (`noticeArrived`).
    private func messageSettled(_ result: SendResult) {
        switch result {
        case .delivered(let id, let latency, let attempts):
            guard waiters.removeValue(forKey: id) != nil else { return }
            world.recorder.receiptArrived(id: id, latency: latency, attempts: attempts, at: world.elapsed)
        case .failed(let id, let failure):
            guard waiters.removeValue(forKey: id) != nil else { return }
            world.recorder.messageFailed(id: id, attempts: failure.attempts, at: world.elapsed)
        case .connectionLost(let id):
            guard waiters.removeValue(forKey: id) != nil else { return }
            world.recorder.messageFailed(id: id, connectionLost: true, at: world.elapsed)
        case .stored:
            return
        }
        outcomeArrived()
    }

    private func noticeArrived(_ notice: DeliveryNotice) {
        switch notice {
        case .delivered(let id, _):
            guard let submitted = waiters.removeValue(forKey: id) else { return }
            world.recorder.receiptArrived(id: id, latency: world.queue.now - submitted, attempts: nil, at: world.elapsed)
        case .discarded(let id, _, _, _):
            guard waiters.removeValue(forKey: id) != nil else { return }
            world.recorder.messageFailed(id: id, at: world.elapsed)
        default:
            return
        }
        outcomeArrived()
    }

    /// A one-shot send leaves once every message has its outcome (after what it is doing now).
    func outcomeArrived() {
        if leavesWhenDone, waiters.isEmpty, typed.isEmpty {
            let process = processes
            world.queue.schedule(after: .zero) { [unowned self] in
                if process == processes { stop() }
            }
        }
        world.noteProgress()
    }
}

extension DeliveryFailure {
    /// Transmissions made before giving up, when known.
    var attempts: Int? {
        switch self {
        case .timedOut(let attempts), .expired(_, let attempts): return attempts
        default: return nil
        }
    }
}
