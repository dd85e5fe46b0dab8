import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import SIMPCore
import SIMPRelay
import SIMPTestKit

/// The relay in the simulator: the production relay — `RelayEngine` and its channel handlers,
/// driving the real `RelayCore` — on an `EmbeddedEventLoop` (`SIMPTestKit.EmbeddedRelay`). The
/// bytes its handlers write go over the simulated links, its store is an `InMemoryRelayStore`
/// that answers after a simulated round trip and can be down, and the loop's clock is the
/// simulation's: every event that reaches the relay first moves the loop to the event's instant,
/// and an event is kept at the engine's timer deadline, so its timers fire in virtual time.
final class SimRelay {
    private unowned let world: SimWorld
    private var relay: EmbeddedRelay!
    private let store: InMemoryRelayStore
    /// Wall-clock milliseconds the store stamps: virtual time after a fixed epoch.
    private let storeClock: NIOLockedValueBox<Int64>
    private(set) var isUp = true
    private var connectionCount: UInt64 = 0
    /// Connections whose relay end is open (a client may have let go of its end already).
    private var connections: [ObjectIdentifier: SimConnection] = [:]
    /// Incremented by a restart, so the previous relay's timer events are ignored.
    private var generation = 0
    /// The engine's timer deadline an event is scheduled for.
    private var timerEvent: NIODeadline?
    /// Rejected input counted by the relays before the one running now.
    private var rejectedEarlier: [RejectReason: Int] = [:]
    /// How long a store request takes.
    private static let storeLatency = TimeAmount.microseconds(300)
    private static let epochMillis: Int64 = 1_700_000_000_000

    init(world: SimWorld) {
        self.world = world
        let clock = NIOLockedValueBox(Self.epochMillis)
        self.storeClock = clock
        self.store = InMemoryRelayStore(clock: { clock.withLockedValue { $0 } })
        self.relay = makeRelay()
    }

    /// A relay that has not started yet, its loop at the simulation's time.
    private func makeRelay() -> EmbeddedRelay {
        var configuration = RelayCore.Configuration(relayId: "sim-relay", udpPort: 7601)
        configuration.requireLogin = false // the simulated clients have no passwords; datagrams are still sealed
        configuration.heartbeat = world.relayHeartbeat
        let loop = EmbeddedEventLoop()
        loop.advanceTime(to: world.queue.deadline)
        let asking = DelayedStore(
            store: store, queue: world.queue, latency: Self.storeLatency,
            stamp: { [unowned self] in
                storeClock.withLockedValue { $0 = Self.epochMillis + world.queue.now.nanoseconds / 1_000_000 }
            }, answer: { [unowned self] answer in drive(answer) })
        return try! EmbeddedRelay(configuration: configuration, seed: world.seed, store: store, asking: asking, loop: loop) {
            [unowned self] envelope in
            world.client(at: envelope.remoteAddress)?.receiveFromRelay(envelope.data)
        }
    }

    /// Rejected input by reason, over every run of the relay.
    var rejected: [RejectReason: Int] { rejectedEarlier.merging(relay.statistics.rejected, uniquingKeysWith: +) }

    /// The relay starts serving: it announces itself and its timers run.
    func start() {
        drive { relay.listen(description: "sim") }
    }

    /// Opens a control connection for `client`; nil while the relay is down.
    func open(for client: SimClient) -> SimConnection? {
        guard isUp else { return nil }
        connectionCount += 1
        let peer = try! SocketAddress(ipAddress: client.ipAddress, port: 40_000 + Int(connectionCount % 20_000))
        let connection = SimConnection(peer: peer, client: client, relay: self, queue: world.queue)
        connections[ObjectIdentifier(connection)] = connection
        drive {
            connection.relayEnd = try! relay.open(
                from: peer,
                written: { [unowned connection] bytes in
                    connection.down.send(bytes)
                },
                closed: { [unowned self, unowned connection] in
                    relayEndClosed(connection)
                })
        }
        return connection
    }

    /// A datagram from `source` reached the relay's UDP port.
    func datagramArrived(_ bytes: ByteBuffer, from source: SocketAddress) {
        guard isUp else { return }
        drive { try! relay.receiveDatagram(bytes, from: source) }
    }

    /// Bytes the client wrote on `connection` reached the relay.
    func controlBytesArrived(_ bytes: ByteBuffer, on connection: SimConnection) {
        guard let channel = connection.relayEnd, channel.isActive else { return }
        drive { try! relay.receive(bytes, on: channel) }
    }

    /// Closes a connection from the relay's side; the client learns it one link delay later.
    func closeConnection(_ connection: SimConnection) {
        drive { connection.relayEnd?.close(promise: nil) }
    }

    /// The client closed `connection`; the relay learns it one link delay later.
    func clientClosed(_ connection: SimConnection) {
        connection.close()
        connection.closedByClient = true
        world.queue.schedule(after: connection.client.up.meanDelay) { [unowned self] in
            drive { connection.relayEnd?.close(promise: nil) }
        }
    }

    /// The relay's end closed (the relay closed it, or learnt the client did).
    private func relayEndClosed(_ connection: SimConnection) {
        connections[ObjectIdentifier(connection)] = nil
        connection.close()
        guard !connection.closedByClient else { return }
        let client = connection.client
        world.queue.schedule(after: client.down.meanDelay) { client.connectionClosed(connection) }
    }

    /// Stops the relay gracefully (every connection drops, its registrations are withdrawn)
    /// and starts a fresh one after `downtime`.
    func restart(downtime: TimeAmount) {
        drive { _ = relay.shutDown() }
        rejectedEarlier = rejected
        generation += 1
        timerEvent = nil
        isUp = false
        relay = makeRelay()
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

    /// Brings the relay's loop to the simulation's time, does `work` there, lets the loop run
    /// what it started, and keeps an event at the engine's timer deadline.
    private func drive(_ work: () -> Void) {
        relay.advance(to: world.queue.deadline)
        work()
        relay.loop.run()
        followTimer()
    }

    /// Keeps one event scheduled at the engine's timer deadline; when it comes, moving the loop
    /// to it fires the timer.
    private func followTimer() {
        guard let deadline = relay.timerDeadline else { return }
        if let scheduled = timerEvent, scheduled <= deadline { return }
        timerEvent = deadline
        let scheduledIn = generation
        world.queue.schedule(at: world.queue.time(of: deadline)) { [unowned self] in
            guard scheduledIn == generation, timerEvent == deadline else { return }
            timerEvent = nil
            drive {}
        }
    }
}

/// The store as the simulated relay reaches it: each request is carried out at once on the
/// shared `InMemoryRelayStore` (after `stamp` set its clock to virtual time), and its answer
/// comes back `latency` later, through `answer` (which completes it with the relay's loop at
/// that instant).
private final class DelayedStore: RelayStore, @unchecked Sendable { // confined to the simulation's thread
    private let store: InMemoryRelayStore
    private let queue: EventQueue
    private let latency: TimeAmount
    private let stamp: () -> Void
    private let answer: (() -> Void) -> Void

    init(
        store: InMemoryRelayStore, queue: EventQueue, latency: TimeAmount, stamp: @escaping () -> Void,
        answer: @escaping (() -> Void) -> Void
    ) {
        self.store = store
        self.queue = queue
        self.latency = latency
        self.stamp = stamp
        self.answer = answer
    }

    func perform(_ request: StoreRequest, on eventLoop: EventLoop) -> EventLoopFuture<StoreAnswer> {
        stamp()
        let promise = eventLoop.makePromise(of: StoreAnswer.self)
        store.perform(request, on: eventLoop).whenComplete { [self] result in
            queue.schedule(after: latency) { [self] in answer { promise.completeWith(result) } }
        }
        return promise.futureResult
    }

    func subscribe(relayId: String, on eventLoop: EventLoop, _ handler: @escaping @Sendable (RelayStoreEvent) -> Void) -> EventLoopFuture<Void> {
        store.subscribe(relayId: relayId, on: eventLoop, handler)
    }

    var roundTrips: Int { store.roundTrips }
    func ping() async throws { try await store.ping() }
    func decoySecret() async throws -> [UInt8] { try await store.decoySecret() }
    func shutdown() async { await store.shutdown() }
}
