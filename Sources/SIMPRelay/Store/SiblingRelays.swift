import NIOConcurrencyHelpers
import NIOCore
import SIMPCore
import SIMPRedis

/// The relays of one process (`simp-server --threads N`): what one publishes for another goes
/// to it directly, on its event loop, instead of through Redis.
public final class SiblingRelays: Sendable {
    struct Listener {
        let eventLoop: EventLoop
        let handler: @Sendable (RelayStoreEvent) -> Void
    }
    private let listeners = NIOLockedValueBox<[String: Listener]>([:])
    private let handedOver = NIOLockedValueBox(0)

    public init() {}

    /// How many times a relay has handed events to another so far: once per receiving relay
    /// and event-loop turn of the sender, however many deliveries the turn gathered.
    package var handoffs: Int { handedOver.withLockedValue { $0 } }

    func listener(_ relayId: String) -> Listener? { listeners.withLockedValue { $0[relayId] } }

    /// Every relay of this process but `relayId`.
    func others(than relayId: String) -> [(relayId: String, listener: Listener)] {
        listeners.withLockedValue { $0.filter { $0.key != relayId }.map { ($0.key, $0.value) } }
    }

    /// Runs `events` on `listener`'s loop, in order, in one task (one wake-up of that loop).
    func hand(_ events: [RelayStoreEvent], to listener: Listener) {
        handedOver.withLockedValue { $0 += 1 }
        listener.eventLoop.execute {
            for event in events { listener.handler(event) }
        }
    }

    fileprivate func listen(_ relayId: String, on eventLoop: EventLoop, _ handler: @escaping @Sendable (RelayStoreEvent) -> Void) {
        listeners.withLockedValue { $0[relayId] = Listener(eventLoop: eventLoop, handler: handler) }
    }

    fileprivate func stopListening(_ relayId: String) {
        listeners.withLockedValue { $0[relayId] = nil }
    }
}

/// What one relay hands its siblings, gathered during an event-loop turn (a read burst) and
/// handed over at its end: one task, so one wake-up, per receiving relay and turn instead of
/// one per delivery. Each receiver gets its events in the order they were asked for.
final class SiblingHandoffs: Sendable {
    private struct Pending {
        var events: [String: [RelayStoreEvent]] = [:]
        var order: [String] = []
        var flushScheduled = false
    }
    private let siblings: SiblingRelays
    private let pending = NIOLockedValueBox(Pending())

    init(siblings: SiblingRelays) { self.siblings = siblings }

    /// Queues `delivery` for relay `relayId` if it runs in this process; false otherwise.
    func deliver(_ delivery: RelayDelivery, to relayId: String, on eventLoop: EventLoop) -> Bool {
        guard siblings.listener(relayId) != nil else { return false }
        enqueue([(relayId, .delivery(delivery.encoded()))], on: eventLoop)
        return true
    }

    /// Tells every relay of this process but `sender` that a user moved, at the end of this
    /// turn (Redis tells them too, later): a receipt that comes back within a round trip of
    /// the move then goes to the user's new relay, not along a cached route.
    func announce(_ move: UserMove, from sender: String, on eventLoop: EventLoop) {
        enqueue(siblings.others(than: sender).map { ($0.relayId, .move(move)) }, on: eventLoop)
    }

    private func enqueue(_ events: [(relayId: String, event: RelayStoreEvent)], on eventLoop: EventLoop) {
        guard !events.isEmpty else { return }
        let schedule = pending.withLockedValue { pending in
            for (relayId, event) in events {
                if pending.events[relayId, default: []].isEmpty { pending.order.append(relayId) }
                pending.events[relayId, default: []].append(event)
            }
            defer { pending.flushScheduled = true }
            return !pending.flushScheduled
        }
        if schedule { eventLoop.execute { self.flush() } }
    }

    private func flush() {
        let batch = pending.withLockedValue { pending in
            defer { pending = Pending() }
            return pending
        }
        for relayId in batch.order {
            guard let events = batch.events[relayId], let listener = siblings.listener(relayId) else { continue }
            siblings.hand(events, to: listener)
        }
    }
}

/// A relay's store, with publishes to relays of the same process short-circuited through
/// `SiblingRelays`; everything else goes to `base`.
public struct SiblingAwareStore: RelayStore {
    public let base: any RelayStore
    public let siblings: SiblingRelays
    private let handoffs: SiblingHandoffs
    private let relayId = NIOLockedValueBox<String?>(nil)

    public init(base: any RelayStore, siblings: SiblingRelays) {
        self.base = base
        self.siblings = siblings
        self.handoffs = SiblingHandoffs(siblings: siblings)
    }

    public func perform(_ request: StoreRequest, on eventLoop: EventLoop) -> EventLoopFuture<StoreAnswer> {
        if case .publish(let relay, let delivery) = request, handoffs.deliver(delivery, to: relay, on: eventLoop) {
            return eventLoop.makeSucceededFuture(.publish(relay: relay, delivery, listeners: 1))
        }
        if case .announceMove(let move) = request { handoffs.announce(move, from: move.relayId, on: eventLoop) }
        return base.perform(request, on: eventLoop)
    }

    public func subscribe(relayId: String, on eventLoop: EventLoop, _ handler: @escaping @Sendable (RelayStoreEvent) -> Void) -> EventLoopFuture<Void>
    {
        self.relayId.withLockedValue { $0 = relayId }
        return base.subscribe(relayId: relayId, on: eventLoop, handler).map { siblings.listen(relayId, on: eventLoop, handler) }
    }

    public var roundTrips: Int { base.roundTrips }
    public var inboxRedis: RedisEndpoint? { base.inboxRedis }
    public func ping() async throws { try await base.ping() }
    public func decoySecret() async throws -> [UInt8] { try await base.decoySecret() }

    public func shutdown() async {
        if let relayId = relayId.withLockedValue({ $0 }) { siblings.stopListening(relayId) }
        await base.shutdown()
    }
}
