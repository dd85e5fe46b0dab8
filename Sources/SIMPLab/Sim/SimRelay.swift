import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import SIMPCore
import SIMPRelay

/// A control connection between a simulated client and the relay: two TCP streams over the
/// client's access link.
final class SimConnection {
    let id: ConnectionID
    /// The client's TCP peer address as the relay sees it.
    let peer: SocketAddress
    unowned let client: SimClient
    private(set) var up: SimTCPStream!
    private(set) var down: SimTCPStream!

    init(id: ConnectionID, peer: SocketAddress, client: SimClient, relay: SimRelay, queue: EventQueue) {
        self.id = id
        self.peer = peer
        self.client = client
        up = SimTCPStream(forward: client.up, reverse: client.down, queue: queue) { [unowned relay, unowned self] message in
            relay.controlReceived(message, on: self)
        }
        down = SimTCPStream(forward: client.down, reverse: client.up, queue: queue) { [unowned client, unowned self] message in
            client.controlArrived(message, on: self)
        }
    }

    func close() {
        up.close()
        down.close()
    }
}

/// The relay in the simulator: the real `RelayCore`, its actions carried out over the
/// simulated network, its store requests answered by an `InMemoryRelayStore` (through the
/// `RelayStore` protocol, after a simulated round trip) that can be down, and its timers
/// driven by `tick` at the core's next deadline, in virtual time.
final class SimRelay {
    private unowned let world: SimWorld
    private var core: RelayCore
    private let store: InMemoryRelayStore
    /// The store's futures complete on this loop, which runs inside the simulation's thread.
    private let storeLoop = EmbeddedEventLoop()
    /// Wall-clock milliseconds the store stamps: virtual time after a fixed epoch.
    private let storeClock: NIOLockedValueBox<Int64>
    private(set) var isUp = true
    private var connections: [ConnectionID: SimConnection] = [:]
    private var connectionCount: UInt64 = 0
    /// Incremented by a restart, so answers and timers of the previous relay are ignored.
    private var generation = 0
    private var armedDeadline: NIODeadline?
    /// Rejected input by reason.
    private(set) var rejected: [RejectReason: Int] = [:]
    /// How long a store request takes.
    private let storeLatency = TimeAmount.microseconds(300)
    private static let epochMillis: Int64 = 1_700_000_000_000

    init(world: SimWorld) {
        self.world = world
        let clock = NIOLockedValueBox(Self.epochMillis)
        self.storeClock = clock
        self.store = InMemoryRelayStore(clock: { clock.withLockedValue { $0 } })
        self.core = Self.makeCore(world: world)
    }

    private static func makeCore(world: SimWorld) -> RelayCore {
        var configuration = RelayCore.Configuration(relayId: "sim-relay", udpPort: 7601)
        configuration.requireLogin = false // the simulated clients have no passwords; datagrams are still sealed
        configuration.heartbeat = world.relayHeartbeat
        return RelayCore(configuration: configuration, entropy: .seeded(world.seed), now: world.queue.deadline)
    }

    /// The relay starts serving: it announces itself and its timers run.
    func start() {
        perform { $0.listening(udpPort: 7601, description: "sim", now: world.queue.deadline, into: &$1) }
    }

    /// Opens a control connection for `client`; nil while the relay is down.
    func open(for client: SimClient) -> SimConnection? {
        guard isUp else { return nil }
        connectionCount += 1
        let id = ConnectionID(connectionCount)
        let peer = try! SocketAddress(ipAddress: client.ipAddress, port: 40_000 + Int(connectionCount % 20_000))
        let connection = SimConnection(id: id, peer: peer, client: client, relay: self, queue: world.queue)
        connections[id] = connection
        perform { $0.connectionOpened(id, peer: peer, now: world.queue.deadline, into: &$1) }
        return connection
    }

    /// A datagram from `source` reached the relay's UDP port.
    func datagramArrived(_ bytes: ByteBuffer, from source: SocketAddress) {
        guard isUp else { return }
        perform { $0.datagramReceived(bytes, from: source, now: world.queue.deadline, into: &$1) }
    }

    /// Closes a connection from the relay's side; the client learns it one link delay later.
    func closeConnection(_ id: ConnectionID) {
        guard let connection = forget(id) else { return }
        let client = connection.client
        world.queue.schedule(after: client.down.meanDelay) { client.connectionClosed(connection) }
    }

    /// The client closed `connection`; the relay learns it one link delay later.
    func clientClosed(_ connection: SimConnection) {
        connection.close()
        world.queue.schedule(after: connection.client.up.meanDelay) { [unowned self] in _ = forget(connection.id) }
    }

    private func forget(_ id: ConnectionID) -> SimConnection? {
        guard let connection = connections.removeValue(forKey: id) else { return nil }
        connection.close()
        perform { $0.connectionClosed(id, into: &$1) }
        return connection
    }

    /// Stops the relay gracefully (every connection drops, its registrations are withdrawn)
    /// and starts a fresh one after `downtime`.
    func restart(downtime: TimeAmount) {
        perform { $0.shutDown(into: &$1) }
        generation += 1
        armedDeadline = nil
        isUp = false
        core = Self.makeCore(world: world)
        world.queue.schedule(after: downtime) { [unowned self] in
            isUp = true
            start()
        }
    }

    /// Stops the store and starts it again, empty, after `downtime`.
    func restartRedis(downtime: TimeAmount) {
        store.isAvailable = false
        store.reset()
        world.queue.schedule(after: downtime) { [unowned self] in store.isAvailable = true }
    }

    fileprivate func controlReceived(_ message: SIMPMessage, on connection: SimConnection) {
        guard connections[connection.id] === connection else { return }
        perform { $0.controlReceived(message, on: connection.id, peer: connection.peer, now: world.queue.deadline, into: &$1) }
    }

    /// Feeds the core one input and carries out what it decided.
    private func perform(_ input: (inout RelayCore, inout [RelayAction]) -> Void) {
        var actions: [RelayAction] = []
        input(&core, &actions)
        for action in actions { perform(action) }
        armTimer()
    }

    private func perform(_ action: RelayAction) {
        switch action {
        case .send(let id, let message):
            connections[id]?.down.send(message)
        case .forward(let id, let payload):
            if let message = try? MessageCodec.decode(payload) { connections[id]?.down.send(message) }
        case .deliver(_, let bytes, let address), .reply(let bytes, let address):
            world.client(at: address)?.receiveFromRelay(bytes)
        case .close(let id):
            closeConnection(id)
        case .reject(let reason, _):
            rejected[reason, default: 0] += 1
        case .store(let request):
            ask(request)
        case .drained:
            break // the simulated relay restarts without draining
        }
    }

    /// Asks the store; the answer reaches the core one simulated round trip later.
    private func ask(_ request: StoreRequest) {
        storeClock.withLockedValue { $0 = Self.epochMillis + world.queue.now.nanoseconds / 1_000_000 }
        let asked = generation
        store.perform(request, on: storeLoop).assumeIsolated().whenComplete { [unowned self] result in
            let answer = result.mapError { $0 as? StoreFailure ?? StoreFailure("\($0)") }
            world.queue.schedule(after: storeLatency) { [unowned self] in
                guard asked == generation else { return }
                perform { $0.storeAnswered(request, answer, now: world.queue.deadline, into: &$1) }
            }
        }
        storeLoop.run()
    }

    /// Keeps one tick scheduled at the core's next deadline.
    private func armTimer() {
        let deadline = core.nextDeadline
        if let armed = armedDeadline, armed <= deadline { return }
        armedDeadline = deadline
        let armedIn = generation
        world.queue.schedule(at: world.queue.time(of: deadline)) { [unowned self] in
            guard armedIn == generation, armedDeadline == deadline, !world.isFinished else { return }
            armedDeadline = nil
            perform { $0.tick(now: world.queue.deadline, into: &$1) }
        }
    }
}
