import NIOCore
import SIMPCore

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

/// The relay in the simulator: the real `RelayCore`, with its actions carried out over the
/// simulated network and an in-memory Redis that can be down.
final class SimRelay {
    private unowned let world: SimWorld
    private var core: RelayCore
    private(set) var isUp = true
    private(set) var redisUp = true
    private var registry: [String: Route] = [:]
    /// Users who registered since Redis last started (`simp:seen:*`).
    private var seen: Set<String> = []
    private var connections: [ConnectionID: SimConnection] = [:]
    private var heartbeats: HeartbeatTable
    private var connectionCount: UInt64 = 0
    private var nextPingId: UInt64 = 1
    /// Rejected input by reason.
    private(set) var rejected: [RejectReason: Int] = [:]
    /// How long a Redis command takes.
    private let redisLatency = TimeAmount.microseconds(300)

    init(world: SimWorld) {
        self.world = world
        self.core = Self.makeCore()
        self.heartbeats = HeartbeatTable(policy: world.relayHeartbeat)
    }

    private static func makeCore() -> RelayCore {
        var configuration = RelayCore.Configuration(relayId: "sim-relay", udpPort: 7601)
        configuration.requireLogin = false // the simulated Redis holds no credentials; datagrams are still sealed
        return RelayCore(configuration: configuration)
    }

    /// Checks heartbeats a few times per interval, as `RelayServer` does, until the run ends.
    func startHeartbeats() {
        let tick = TimeAmount.nanoseconds(max(20_000_000, min(1_000_000_000, heartbeats.policy.interval.nanoseconds / 4)))
        world.queue.schedule(after: tick) { [unowned self] in
            guard !world.isFinished else { return }
            if isUp { heartbeatTick() }
            startHeartbeats()
        }
    }

    private func heartbeatTick() {
        let due = heartbeats.poll(now: world.queue.deadline)
        for id in due.ping.sorted(by: { $0.rawValue < $1.rawValue }) {
            connections[id]?.down.send(SIMPMessage(kind: .ping, messageId: nextPingId))
            nextPingId += 1
        }
        for id in due.dead.sorted(by: { $0.rawValue < $1.rawValue }) {
            perform([.reject(.heartbeatTimeout, detail: "\(id)"), .close(id)])
        }
    }

    /// Opens a control connection for `client`; nil while the relay is down.
    func open(for client: SimClient) -> SimConnection? {
        guard isUp else { return nil }
        connectionCount += 1
        let id = ConnectionID(connectionCount)
        let peer = try! SocketAddress(ipAddress: client.ipAddress, port: 40_000 + Int(connectionCount % 20_000))
        let connection = SimConnection(id: id, peer: peer, client: client, relay: self, queue: world.queue)
        connections[id] = connection
        heartbeats.opened(id, now: world.queue.deadline)
        perform(core.connectionOpened(id, peer: peer, now: world.queue.deadline))
        return connection
    }

    /// A datagram from `source` reached the relay's UDP port.
    func datagramArrived(_ bytes: ByteBuffer, from source: SocketAddress) {
        guard isUp else { return }
        perform(core.datagramReceived(bytes, from: source, now: world.queue.deadline))
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
        heartbeats.closed(id)
        perform(core.connectionClosed(id))
        return connection
    }

    /// Stops the relay (every connection drops, its registrations are withdrawn) and starts a
    /// fresh one after `downtime`.
    func restart(downtime: TimeAmount) {
        for id in connections.keys.sorted(by: { $0.rawValue < $1.rawValue }) { closeConnection(id) }
        if redisUp { registry = registry.filter { $0.value.relayId != core.configuration.relayId } }
        isUp = false
        core = Self.makeCore()
        world.queue.schedule(after: downtime) { [unowned self] in isUp = true }
    }

    /// Stops Redis and starts it again, empty, after `downtime`.
    func restartRedis(downtime: TimeAmount) {
        redisUp = false
        registry.removeAll()
        seen.removeAll()
        world.queue.schedule(after: downtime) { [unowned self] in redisUp = true }
    }

    fileprivate func controlReceived(_ message: SIMPMessage, on connection: SimConnection) {
        guard connections[connection.id] === connection else { return }
        heartbeats.heard(connection.id, now: world.queue.deadline)
        perform(core.controlReceived(message, on: connection.id, peer: connection.peer, now: world.queue.deadline))
    }

    private func perform(_ actions: [RelayCore.Action]) {
        for action in actions { perform(action) }
    }

    private func perform(_ action: RelayCore.Action) {
        switch action {
        case .send(let id, let message):
            connections[id]?.down.send(message)
        case .deliver(_, let bytes, let address), .reply(let bytes, let address):
            world.client(at: address)?.receiveFromRelay(bytes)
        case .publish, .announceMove, .checkSession:
            break // the simulation has one relay: there is no other relay to hand anything to
        case .register(let user, let route, _, let id):
            world.queue.schedule(after: redisLatency) { [unowned self] in
                if redisUp {
                    registry[user] = route
                    seen.insert(user)
                }
                perform(core.registrationCompleted(id, succeeded: redisUp))
            }
        case .unregister(let user, _):
            if redisUp { registry[user] = nil }
        case .moveRoute(let user, let route, _):
            if redisUp { registry[user] = route }
        case .lookup(let user):
            world.queue.schedule(after: redisLatency) { [unowned self] in
                let now = world.queue.deadline
                perform(redisUp ? core.lookupCompleted(user: user, route: registry[user], known: seen.contains(user), now: now)
                                : core.lookupFailed(user: user))
            }
        case .fetchVerifier(_, let id):
            perform(core.verifierFetched(id, verifier: nil)) // not reached: the simulated relay needs no login
        case .close(let id):
            closeConnection(id)
        case .reject(let reason, _):
            rejected[reason, default: 0] += 1
        // The simulated Redis keeps no inboxes: a message for an offline user is dropped (and
        // counted) for its sender to retransmit, as before the inbox existed.
        case .storeInInbox:
            rejected[.recipientOffline, default: 0] += 1
        case .loadInbox, .removeFromInbox, .roomRequest, .postToRoom, .countRoomDelivery, .recordPresence, .who:
            break // no inboxes and no rooms in the simulation
        }
    }
}
