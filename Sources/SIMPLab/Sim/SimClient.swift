import NIOCore
import SIMPCore

/// A client in the simulator: the real `ReliableSender`, `ReceiverCore`, `Heartbeat` and
/// `Backoff`, wired as `SIMPClient`'s engine wires them: nothing is sent before CONNECTED, one
/// timer serves every deadline, a lost control connection suspends sending and is reconnected
/// with backoff, after which everything unreceipted is sent again.
final class SimClient {
    let user: String
    let isSender: Bool
    let ipAddress: String
    let up: SimLink
    let down: SimLink
    private unowned let world: SimWorld
    private(set) var sender: ReliableSender
    private var receiver = ReceiverCore()
    private var heartbeat: Heartbeat?
    /// When the next UDP keepalive (a PING datagram to the relay) is due, while connected.
    private var nextKeepalive: NIODeadline?
    private var backoff: Backoff?
    private var random: SeededRandom
    private var nextPingId: UInt64 = 1
    /// The registered control connection, and one in its CONNECT handshake.
    private(set) var control: SimConnection?
    private var handshake: SimConnection?
    private var handshakeGeneration = 0
    /// Whether the client has been registered at least once.
    private(set) var hasConnected = false
    /// The UDP port registered with the relay.
    private let registeredPort = 50_000
    /// The UDP port the relay's datagrams reach now (changes on a NAT rebinding).
    private(set) var publicPort = 50_000
    /// Messages whose outcome the application still waits for.
    private var waiters: Set<UInt64> = []
    private var timerDeadline: NIODeadline?
    private var timerGeneration = 0
    private let allocator = ByteBufferAllocator()

    init(user: String, isSender: Bool, index: Int, up: SimLink, down: SimLink, world: SimWorld) {
        self.user = user
        self.isSender = isSender
        self.ipAddress = "10.\(index / 65_536 % 256).\(index / 256 % 256).\(index % 256)"
        self.up = up
        self.down = down
        self.world = world
        self.random = SeededRandom(seed: world.seed, stream: 1_000_000 + UInt64(index))
        self.sender = ReliableSender(firstMessageId: UInt64(index) << 32, policy: world.scenario.policy)
        self.backoff = world.configuration.reconnect.map(Backoff.init)
        sender.suspend() // nothing goes out before the relay accepted CONNECT
    }

    var publicAddress: SocketAddress { try! SocketAddress(ipAddress: ipAddress, port: publicPort) }
    var isConnected: Bool { control != nil }
    var outstanding: Int { waiters.count + receiver.heldCount }

    // MARK: Connecting

    /// Opens a control connection and sends CONNECT; failure leads to a reconnect attempt.
    func connect() {
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
        var connect = SIMPMessage(kind: .connect, fromUser: user)
        connect.udpPort = UInt32(registeredPort)
        connection.up.send(connect)
        world.queue.schedule(after: timeout) { [unowned self] in handshakeFailed(generation) }
    }

    private func handshakeFailed(_ generation: Int) {
        guard generation == handshakeGeneration, control == nil else { return }
        if let handshake { world.relay.clientClosed(handshake) }
        handshake = nil
        handshakeGeneration += 1
        scheduleReconnect()
    }

    private func adopt(_ connection: SimConnection) {
        handshake = nil
        handshakeGeneration += 1
        control = connection
        hasConnected = true
        heartbeat = Heartbeat(policy: world.configuration.heartbeat, now: world.queue.deadline)
        nextKeepalive = world.queue.deadline + world.configuration.keepaliveInterval
        backoff?.reset()
        world.clientConnected(self)
        carryOut(sender.resume(now: world.queue.deadline))
    }

    private func scheduleReconnect() {
        guard var backoff else { return }
        let (_, delay) = backoff.next(random: random.unit())
        self.backoff = backoff
        world.queue.schedule(after: delay) { [unowned self] in connect() }
    }

    /// The NAT in front of this client maps it to a new public port.
    func rebind() {
        world.addressChanged(of: self) { publicPort += 1 }
    }

    /// The application sends `text` to `user`.
    func submit(text: String, to user: String) {
        let message = SIMPMessage(kind: .text, fromUser: self.user, toUser: user, content: text)
        let (id, output) = sender.submit(message, now: world.queue.deadline)
        waiters.insert(id)
        world.recorder.messageSent()
        carryOut(output)
    }

    // MARK: Input

    /// A datagram from the relay enters this client's downlink.
    func receiveFromRelay(_ bytes: ByteBuffer) {
        down.send(bytes) { [unowned self] in datagramArrived($0) }
    }

    private func datagramArrived(_ bytes: ByteBuffer) {
        guard let message = try? MessageCodec.decode(bytes), message.kind.isContent else { return }
        let now = world.queue.deadline
        let outcome = receiver.receive(message, arrivedAt: now, now: now)
        control?.up.send(outcome.receipt)
        deliver(outcome.deliver)
        if receiver.heldCount > 0 { armTimer() }
    }

    private func deliver(_ messages: [SIMPMessage]) {
        for message in messages { world.recorder.appReceived(from: message.fromUser, to: user, text: message.content) }
        if !messages.isEmpty { world.noteProgress() }
    }

    func controlArrived(_ message: SIMPMessage, on connection: SimConnection) {
        if connection === handshake {
            switch message.kind {
            case .connected: adopt(connection)
            case .error: handshakeFailed(handshakeGeneration)
            default: break
            }
            return
        }
        guard connection === control else { return }
        heartbeat?.heard(at: world.queue.deadline)
        switch message.kind {
        case .receipt:
            carryOut(sender.handleReceipt(message, now: world.queue.deadline))
        case .error where message.messageId != 0 && sender.isPending(message.messageId):
            carryOut(sender.handleRejection(messageId: message.messageId, code: message.errorCode,
                                            reason: message.errorText, now: world.queue.deadline))
        case .ping:
            var pong = SIMPMessage(kind: .pong, messageId: message.messageId)
            pong.time = message.time
            connection.up.send(pong)
        default:
            break
        }
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
        heartbeat = nil
        nextKeepalive = nil
        sender.suspend()
        armTimer()
        if backoff != nil {
            scheduleReconnect()
            return
        }
        for _ in waiters { world.recorder.messageFailed(connectionLost: true) }
        waiters.removeAll()
        world.noteProgress()
    }

    // MARK: Output

    /// One datagram up the link to the relay, from the NAT mapping in force as it leaves.
    private func sendDatagram(_ message: SIMPMessage) {
        let source = publicAddress
        up.send(MessageCodec.encode(message, allocator: allocator)) { [unowned self] bytes in
            world.relay.datagramArrived(bytes, from: source)
        }
    }

    private func carryOut(_ output: SenderOutput) {
        output.transmit.forEach(sendDatagram)
        for event in output.events { report(event) }
        armTimer()
    }

    private func report(_ event: SenderEvent) {
        switch event {
        case .delivered(let id, _, let latency, _):
            guard waiters.remove(id) != nil else { return }
            world.recorder.receiptArrived(latency: latency)
        case .failed(let id, _, _):
            guard waiters.remove(id) != nil else { return }
            world.recorder.messageFailed()
        }
        world.noteProgress()
    }

    /// One timer at the earliest deadline: retransmission, held message, heartbeat, keepalive.
    private func armTimer() {
        let deadlines = [sender.nextDeadline, receiver.nextDeadline, heartbeat?.nextDeadline, nextKeepalive]
        guard let deadline = deadlines.compactMap({ $0 }).min() else {
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
            timerFired(now: world.queue.deadline)
        }
    }

    private func timerFired(now: NIODeadline) {
        deliver(receiver.poll(now: now))
        switch heartbeat?.poll(now: now) ?? .none {
        case .none:
            break
        case .sendPing:
            let ping = SIMPMessage(kind: .ping, messageId: nextPingId, fromUser: user)
            nextPingId += 1
            control?.up.send(ping)
        case .peerDead:
            if let control {
                world.relay.clientClosed(control)
                connectionClosed(control)
            }
        }
        if let keepalive = nextKeepalive, keepalive <= now {
            sendDatagram(SIMPMessage(kind: .ping, fromUser: user))
            nextKeepalive = now + world.configuration.keepaliveInterval
        }
        carryOut(sender.poll(now: now))
    }
}
