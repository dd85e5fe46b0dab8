import NIOCore
import SIMPClient
import SIMPCore

/// A client in the simulator: the client's own `ClientSession` (the same one `SIMPClient`
/// drives), connected to simulated links instead of sockets. Its process can stop (`stop`) and
/// start again afresh (`start`), as a device that goes offline and comes back.
final class SimClient: ClientShell {
    let user: String
    let isSender: Bool
    /// The device it logs in as (PROTOCOL §4.7; "" is the user's default device).
    let device: String
    /// A send-only session: never a route for content, never gets stored messages.
    let sendOnly: Bool
    let ipAddress: String
    let up: SimLink
    let down: SimLink
    private unowned let world: SimWorld
    var session: ClientSession
    private var random: SeededRandom
    /// The registered control connection, and one in its CONNECT handshake.
    private(set) var control: SimConnection?
    private var handshake: SimConnection?
    private var handshakeGeneration = 0
    /// Whether the client has been registered at least once.
    private(set) var hasConnected = false
    /// The UDP port registered with the relay (a new process binds a new one).
    private var registeredPort = 50_000
    /// The UDP port the relay's datagrams reach now (changes on a NAT rebinding).
    private(set) var publicPort = 50_000
    /// Messages whose outcome the application still waits for.
    /// Messages without an outcome yet, with when they were submitted.
    private var waiters: [UInt64: TimeAmount] = [:]
    private var timerDeadline: NIODeadline?
    private var timerGeneration = 0
    /// The sender's retransmission count already passed to the recorder.
    private var retransmitsRecorded = 0
    /// Whether the application took messages since progress was last noted.
    private var messagesTaken = false
    private let allocator = ByteBufferAllocator()
    private let index: Int
    /// Whether the client's process runs, and how many processes it has had: what a stopped
    /// process scheduled (timers, reconnects, datagrams on their way to it) is ignored.
    private(set) var isRunning = false
    private var processes = 0
    /// Stop once every submitted message has its outcome (a one-shot send).
    var leavesWhenDone = false

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
        self.session = Self.makeSession(user: user, device: device, sendOnly: sendOnly, firstMessageId: UInt64(index) << 32, world: world)
    }

    private static func makeSession(user: String, device: String, sendOnly: Bool, firstMessageId: UInt64, world: SimWorld) -> ClientSession {
        var configuration = ClientSession.Configuration(user: user, firstMessageId: firstMessageId)
        configuration.device = device
        configuration.sendOnly = sendOnly
        configuration.retransmit = world.scenario.policy
        configuration.heartbeat = world.configuration.heartbeat
        configuration.reconnect = world.configuration.reconnect
        configuration.keepaliveInterval = world.configuration.keepaliveInterval
        configuration.batchesReceipts = true // as the reference client: batches that wait up to 10 ms
        return ClientSession(configuration: configuration)
    }

    /// The client's retransmission counters.
    var sender: ReliableSender { session.sender }
    var publicAddress: SocketAddress { try! SocketAddress(ipAddress: ipAddress, port: publicPort) }
    var isConnected: Bool { control != nil }
    var outstanding: Int { waiters.count + (isRunning ? session.receiver.heldCount : 0) }

    // MARK: Process

    /// The client's process starts and connects. A process after the first is a new one: a
    /// fresh session (ids, receiver state) and a new UDP port.
    func start() {
        guard !isRunning else { return }
        if processes > 0 {
            world.addressChanged(of: self) { publicPort += 1 }
            registeredPort = publicPort
            session = Self.makeSession(
                user: user, device: device, sendOnly: sendOnly, firstMessageId: UInt64(index) << 32 | UInt64(processes) << 24, world: world)
            retransmitsRecorded = 0
        }
        processes += 1
        isRunning = true
        connect()
    }

    /// The client's process stops: it says DISCONNECT on its control connection (TCP still
    /// delivers what was written before, receipts included) and is gone; what it held back is
    /// lost with it. The relay closes the connection on the DISCONNECT.
    func stop() {
        guard isRunning else { return }
        // As the reference client closes: receipts still waiting in a batch go out before the
        // DISCONNECT (else the relay would deliver those messages to the next process again).
        isRunning = false // first: no timer is armed for the process that ends
        carryOut(session.finishTakingMessages(now: world.queue.deadline))
        handshakeGeneration += 1
        if let handshake { world.relay.clientClosed(handshake) }
        handshake = nil
        control?.send(SIMPMessage(kind: .disconnect, fromUser: user))
        control = nil
        world.noteProgress()
    }

    // MARK: Connecting

    /// Opens a control connection and starts logging in; failure leads to a reconnect attempt.
    func connect() {
        guard isRunning else { return }
        handshakeGeneration += 1
        let generation = handshakeGeneration
        let timeout = world.configuration.connectTimeout
        guard !up.isDown, !down.isDown else {
            world.queue.schedule(after: timeout) { [unowned self] in handshakeFailed(generation) }
            return
        }
        guard let connection = world.relay.open(for: self) else {
            // Connection refused, one round trip later.
            world.queue.schedule(after: up.meanDelay + down.meanDelay) { [unowned self] in handshakeFailed(generation) }
            return
        }
        handshake = connection
        connection.send(session.beginLogin(udpPort: registeredPort))
        world.queue.schedule(after: timeout) { [unowned self] in handshakeFailed(generation) }
    }

    private func handshakeFailed(_ generation: Int) {
        guard generation == handshakeGeneration, control == nil else { return }
        if let handshake { world.relay.clientClosed(handshake) }
        handshake = nil
        handshakeGeneration += 1
        carryOut(session.connectAttemptFailed(random: random.unit()))
    }

    private func adopt(_ connection: SimConnection, _ output: ClientSession.Output) {
        handshake = nil
        handshakeGeneration += 1
        control = connection
        hasConnected = true
        world.clientConnected(self)
        carryOut(output)
    }

    /// The NAT in front of this client maps it to a new public port.
    func rebind() {
        world.addressChanged(of: self) { publicPort += 1 }
    }

    /// The application sends `text` to `user`.
    func submit(text: String, to user: String) {
        let message = SIMPMessage(kind: .text, toUser: user, content: text)
        let (id, output) = session.submit(message, now: world.queue.deadline)
        waiters[id] = world.queue.now
        world.recorder.messageSent(id: id, from: self.user, to: user, text: text, at: world.elapsed)
        carryOut(output)
    }

    // MARK: Input

    /// A datagram from the relay enters this client's downlink (to the process running now).
    func receiveFromRelay(_ bytes: ByteBuffer) {
        let process = processes
        down.send(bytes) { [unowned self] in
            guard isRunning, process == processes else { return }
            datagramArrived($0)
        }
    }

    private func datagramArrived(_ bytes: ByteBuffer) {
        let now = world.queue.deadline
        carryOut(session.datagramArrived(bytes, arrivedAt: now, now: now))
        carryOut(session.datagramBurstEnded(now: now)) // each simulated arrival is a read burst of its own
    }

    func controlArrived(_ message: SIMPMessage, on connection: SimConnection) {
        if connection === handshake {
            switch session.loginReceived(message, now: world.queue.deadline) {
            case .send(let frame)?: connection.send(frame)
            case .registered(_, let output)?: adopt(connection, output)
            case .refused?: handshakeFailed(handshakeGeneration)
            case nil: break
            }
            return
        }
        guard connection === control else { return }
        carryOut(session.controlReceived(message, now: world.queue.deadline))
    }

    /// A control connection closed: a handshake fails; a registered session is suspended and
    /// reconnected (or, without a reconnect policy, everything outstanding is reported lost).
    func connectionClosed(_ closed: SimConnection) {
        if closed === handshake {
            handshakeFailed(handshakeGeneration)
            return
        }
        guard closed === control else { return }
        control = nil
        let mayReconnect = world.configuration.reconnect != nil
        carryOut(session.controlLost(mayReconnect: mayReconnect, random: random.unit()))
        guard !mayReconnect else { return }
        for id in waiters.keys.sorted() { world.recorder.messageFailed(id: id, connectionLost: true, at: world.elapsed) }
        waiters.removeAll()
        world.noteProgress()
    }

    // MARK: Output (ClientShell: SIMPClient's `carryOut` interprets the session's output)

    var datagramAllocator: ByteBufferAllocator? { allocator }

    /// The application takes every message (the recorder finds duplicates); progress is noted
    /// once the session is no longer borrowed (`outputWillBeReported`).
    func take(_ message: SIMPMessage) -> Bool {
        world.recorder.appReceived(from: message.fromUser, to: user, device: device, text: message.content, at: world.elapsed)
        messagesTaken = true
        return true
    }

    /// Datagrams up the link to the relay, from the NAT mapping in force as they leave.
    func sendDatagrams(_ sealed: [ByteBuffer]) {
        let source = publicAddress
        for datagram in sealed {
            up.send(datagram) { [unowned self] bytes in
                world.relay.datagramArrived(bytes, from: source)
            }
        }
    }

    func writeControl(_ frames: [SIMPMessage]) { for frame in frames { control?.send(frame) } }

    func messageDelayed(_ message: DelayedMessage) {}

    func outputWillBeReported(_ output: ClientSession.Output) {
        if messagesTaken {
            messagesTaken = false
            world.noteProgress()
        }
        if session.sender.retransmits > retransmitsRecorded {
            world.recorder.retransmitted(session.sender.retransmits - retransmitsRecorded, at: world.elapsed)
            retransmitsRecorded = session.sender.retransmits
        }
    }

    /// A stored message has its outcome when the relay says it was delivered from the inbox
    /// (or discarded), as in real mode (`noticeArrived`).
    func messageSettled(_ result: SendResult) {
        switch result {
        case .delivered(let id, let latency, let attempts):
            guard waiters.removeValue(forKey: id) != nil else { return }
            world.recorder.receiptArrived(id: id, latency: latency, attempts: attempts, at: world.elapsed)
        case .failed(let id, let failure):
            guard waiters.removeValue(forKey: id) != nil else { return }
            world.recorder.messageFailed(id: id, attempts: failure.attempts, at: world.elapsed)
        case .stored, .connectionLost:
            return
        }
        outcomeArrived()
    }

    func noticeArrived(_ notice: DeliveryNotice) {
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

    func peerEventArrived(_ event: PeerEvent) {}

    func requestAnswered(_ requestId: UInt64, _ result: Result<[String], SIMPClientError>) {}

    func closeControl() {
        guard let control else { return }
        world.relay.clientClosed(control)
        connectionClosed(control)
    }

    func reconnect(attempt: Int, after delay: TimeAmount) {
        let process = processes
        world.queue.schedule(after: delay) { [unowned self] in
            if process == processes { connect() }
        }
    }

    /// A one-shot send leaves once every message has its outcome (after what it is doing now).
    private func outcomeArrived() {
        if leavesWhenDone, waiters.isEmpty {
            let process = processes
            world.queue.schedule(after: .zero) { [unowned self] in
                if process == processes { stop() }
            }
        }
        world.noteProgress()
    }

    /// One timer at the session's next deadline.
    func armTimer(at deadline: NIODeadline?) {
        guard isRunning, let deadline else {
            timerGeneration += 1
            timerDeadline = nil
            return
        }
        if let timerDeadline, timerDeadline <= deadline { return }
        timerGeneration += 1
        timerDeadline = deadline
        let generation = timerGeneration
        world.queue.schedule(at: world.queue.time(of: deadline)) { [unowned self] in
            guard generation == timerGeneration else { return }
            timerDeadline = nil
            carryOut(session.poll(now: world.queue.deadline))
        }
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
