import NIOCore
import SIMPCore

/// A control connection between a simulated client and the relay: two TCP streams over the
/// client's access link.
final class SimConnection {
    let id: ConnectionID
    /// The client's TCP peer address as the relay sees it.
    let peer: SocketAddress
    let up: SimTCPStream
    let down: SimTCPStream

    init(id: ConnectionID, peer: SocketAddress, up: SimTCPStream, down: SimTCPStream) {
        self.id = id
        self.peer = peer
        self.up = up
        self.down = down
    }

    func close() {
        up.close()
        down.close()
    }
}

/// The relay in the simulator: the real `RelayCore`, with its actions carried out over the
/// simulated network and an in-memory Redis that can be down.
final class SimRelay {
    private unowned let world: SimWorld
    private var core: RelayCore
    private(set) var isUp = true
    private(set) var redisUp = true
    private var registry: [String: Route] = [:]
    private var connections: [ConnectionID: (connection: SimConnection, client: SimClient)] = [:]
    private var connectionCount: UInt64 = 0
    /// Rejected input by reason.
    private(set) var rejected: [RejectReason: Int] = [:]
    /// How long a Redis command takes.
    private let redisLatency = TimeAmount.microseconds(300)

    init(world: SimWorld) {
        self.world = world
        self.core = Self.makeCore()
    }

    private static func makeCore() -> RelayCore {
        RelayCore(configuration: .init(relayId: "sim-relay", udpPort: 7601))
    }

    /// Opens a control connection for `client`; nil while the relay is down.
    func open(for client: SimClient) -> SimConnection? {
        guard isUp else { return nil }
        connectionCount += 1
        let id = ConnectionID(connectionCount)
        let peer = try! SocketAddress(ipAddress: client.ipAddress, port: 40_000 + Int(connectionCount % 20_000))
        let up = SimTCPStream(forward: client.up, reverse: client.down, queue: world.queue) { [unowned self] message in
            controlReceived(message, on: id, peer: peer)
        }
        let down = SimTCPStream(forward: client.down, reverse: client.up, queue: world.queue) { [unowned client] message in
            client.controlArrived(message)
        }
        let connection = SimConnection(id: id, peer: peer, up: up, down: down)
        connections[id] = (connection, client)
        core.connectionOpened(id)
        return connection
    }

    /// A datagram reached the relay's UDP port.
    func datagramArrived(_ bytes: ByteBuffer) {
        guard isUp else { return }
        perform(core.datagramReceived(bytes, now: world.queue.deadline))
    }

    /// Closes a connection from the relay's side (or because it broke); the client learns it
    /// one link delay later.
    func closeConnection(_ id: ConnectionID) {
        guard let entry = connections.removeValue(forKey: id) else { return }
        entry.connection.close()
        perform(core.connectionClosed(id))
        let client = entry.client
        world.queue.schedule(after: client.down.meanDelay) { client.connectionClosed(entry.connection) }
    }

    /// Stops the relay (every connection drops, its registrations are withdrawn) and starts a
    /// fresh one after `downtime`.
    func restart(downtime: TimeAmount) {
        for id in connections.keys.sorted(by: { $0.rawValue < $1.rawValue }) { closeConnection(id) }
        registry = registry.filter { $0.value.relayId != core.configuration.relayId }
        isUp = false
        core = Self.makeCore()
        world.queue.schedule(after: downtime) { [unowned self] in isUp = true }
    }

    /// Stops Redis and starts it again, empty, after `downtime`.
    func restartRedis(downtime: TimeAmount) {
        redisUp = false
        registry.removeAll()
        world.queue.schedule(after: downtime) { [unowned self] in redisUp = true }
    }

    private func controlReceived(_ message: SIMPMessage, on id: ConnectionID, peer: SocketAddress) {
        guard connections[id] != nil else { return }
        perform(core.controlReceived(message, on: id, peer: peer))
    }

    private func perform(_ actions: [RelayCore.Action]) {
        for action in actions { perform(action) }
    }

    private func perform(_ action: RelayCore.Action) {
        switch action {
        case .send(let id, let message):
            connections[id]?.connection.down.send(message)
        case .forward(let bytes, let address):
            world.client(at: address)?.receiveFromRelay(bytes)
        case .register(let user, let route, _, let id):
            world.queue.schedule(after: redisLatency) { [unowned self] in
                if redisUp { registry[user] = route }
                perform(core.registrationCompleted(id, succeeded: redisUp))
            }
        case .unregister(let user, _):
            if redisUp { registry[user] = nil }
        case .lookup(let user):
            world.queue.schedule(after: redisLatency) { [unowned self] in
                perform(redisUp ? core.lookupCompleted(user: user, route: registry[user], now: world.queue.deadline)
                                : core.lookupFailed(user: user))
            }
        case .close(let id):
            closeConnection(id)
        case .reject(let reason, _):
            rejected[reason, default: 0] += 1
        }
    }
}
