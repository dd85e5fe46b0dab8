import NIOCore
import SIMPCore

/// A client in the simulator: the real `ReliableSender` and `ReceiverCore`, wired as
/// `SIMPClient`'s engine wires them (datagrams to the relay, receipts over TCP, one timer at the
/// sender's next deadline, outstanding sends reported lost when the connection drops).
final class SimClient {
    let user: String
    let isSender: Bool
    let ipAddress: String
    let up: SimLink
    let down: SimLink
    private unowned let world: SimWorld
    private(set) var sender: ReliableSender
    private var receiver = ReceiverCore()
    private(set) var connection: SimConnection?
    private(set) var isConnected = false
    /// The UDP port registered with the relay.
    private let registeredPort = 50_000
    /// The UDP port the relay's datagrams reach now (changes on a NAT rebinding).
    private(set) var publicPort = 50_000
    /// Messages whose outcome the application still waits for.
    private var waiters: Set<UInt64> = []
    private var timerDeadline: NIODeadline?
    private var timerGeneration = 0
    private let allocator = ByteBufferAllocator()

    init(user: String, isSender: Bool, index: Int, up: SimLink, down: SimLink, policy: RetransmitPolicy, world: SimWorld) {
        self.user = user
        self.isSender = isSender
        self.ipAddress = "10.\(index / 65_536 % 256).\(index / 256 % 256).\(index % 256)"
        self.up = up
        self.down = down
        self.world = world
        self.sender = ReliableSender(firstMessageId: UInt64(index + 1) << 32, policy: policy)
    }

    var publicAddress: SocketAddress { try! SocketAddress(ipAddress: ipAddress, port: publicPort) }

    /// Opens a control connection and sends CONNECT.
    func connect() {
        guard let connection = world.relay.open(for: self) else { return }
        self.connection = connection
        var connect = SIMPMessage(kind: .connect, fromUser: user)
        connect.udpPort = UInt32(registeredPort)
        connection.up.send(connect)
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
        connection?.up.send(outcome.receipt)
        if outcome.deliver { world.recorder.appReceived(from: message.fromUser, to: user, text: message.content) }
    }

    func controlArrived(_ message: SIMPMessage) {
        switch message.kind {
        case .connected:
            isConnected = true
            world.clientConnected(self)
        case .receipt:
            carryOut(sender.handleReceipt(message, now: world.queue.deadline))
        case .error where message.messageId != 0 && sender.isPending(message.messageId):
            carryOut(sender.handleRejection(messageId: message.messageId, code: message.errorCode,
                                            reason: message.errorText, now: world.queue.deadline))
        case .ping:
            var pong = SIMPMessage(kind: .pong, messageId: message.messageId)
            pong.time = message.time
            connection?.up.send(pong)
        default:
            break
        }
    }

    /// The control connection closed: everything outstanding is reported lost, as `SIMPClient` does.
    func connectionClosed(_ closed: SimConnection) {
        guard connection === closed else { return }
        connection = nil
        isConnected = false
        for _ in waiters { world.recorder.messageFailed(connectionLost: true) }
        if !waiters.isEmpty { world.noteResolution() }
        waiters.removeAll()
        timerGeneration += 1
        timerDeadline = nil
    }

    // MARK: Output

    private func carryOut(_ output: SenderOutput) {
        for message in output.transmit {
            up.send(MessageCodec.encode(message, allocator: allocator)) { [unowned self] bytes in
                world.relay.datagramArrived(bytes)
            }
        }
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
        world.noteResolution()
    }

    private func armTimer() {
        guard let deadline = sender.nextDeadline else {
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
            carryOut(sender.poll(now: world.queue.deadline))
        }
    }
}
