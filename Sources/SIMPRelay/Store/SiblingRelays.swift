import NIOConcurrencyHelpers
import NIOCore
import SIMPCore
import SIMPRedis

/// The relays of one process (`simp-server --threads N`): what one publishes for another goes
/// to it directly, on its event loop, instead of through Redis.
public final class SiblingRelays: Sendable {
    private struct Listener {
        let eventLoop: EventLoop
        let handler: @Sendable (RelayStoreEvent) -> Void
    }
    private let listeners = NIOLockedValueBox<[String: Listener]>([:])

    public init() {}

    /// Hands `delivery` to relay `relayId` if it runs in this process; false otherwise.
    func deliver(_ delivery: RelayDelivery, to relayId: String) -> Bool {
        guard let listener = listeners.withLockedValue({ $0[relayId] }) else { return false }
        let bytes = delivery.encoded()
        listener.eventLoop.execute { listener.handler(.delivery(bytes)) }
        return true
    }

    /// Tells every relay of this process but `sender` at once that a user moved (Redis tells
    /// them too, later): a receipt that comes back within a round trip of the move then goes
    /// to the user's new relay, not along a cached route.
    func announce(_ move: UserMove, from sender: String) {
        for (relayId, listener) in listeners.withLockedValue({ $0 }) where relayId != sender {
            listener.eventLoop.execute { listener.handler(.move(move)) }
        }
    }

    fileprivate func listen(_ relayId: String, on eventLoop: EventLoop, _ handler: @escaping @Sendable (RelayStoreEvent) -> Void) {
        listeners.withLockedValue { $0[relayId] = Listener(eventLoop: eventLoop, handler: handler) }
    }

    fileprivate func stopListening(_ relayId: String) {
        listeners.withLockedValue { $0[relayId] = nil }
    }
}

/// A relay's store, with publishes to relays of the same process short-circuited through
/// `SiblingRelays`; everything else goes to `base`.
public struct SiblingAwareStore: RelayStore {
    public let base: any RelayStore
    public let siblings: SiblingRelays
    private let relayId = NIOLockedValueBox<String?>(nil)

    public init(base: any RelayStore, siblings: SiblingRelays) {
        self.base = base
        self.siblings = siblings
    }

    public func perform(_ request: StoreRequest, on eventLoop: EventLoop) -> EventLoopFuture<StoreAnswer> {
        if case .publish(let relay, let delivery) = request, siblings.deliver(delivery, to: relay) {
            return eventLoop.makeSucceededFuture(.publish(relay: relay, delivery, listeners: 1))
        }
        if case .announceMove(let move) = request { siblings.announce(move, from: move.relayId) }
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
