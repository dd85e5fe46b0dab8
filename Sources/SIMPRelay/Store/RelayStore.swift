import NIOCore
import SIMPCore
import SIMPRedis

/// Where a relay keeps what outlives a connection: credentials, registrations, inboxes, rooms,
/// presence, and the channels between relays. `RedisRelayStore` is the production one;
/// `InMemoryRelayStore` serves tests and the simulator. The relay asks only through
/// `perform`, and every answer, failures included, goes back to its core.
public protocol RelayStore: Sendable {
    /// Carries out `request`; the future completes (on any loop) with the answer, or fails.
    func perform(_ request: StoreRequest, on eventLoop: EventLoop) -> EventLoopFuture<StoreAnswer>

    /// Starts delivering what other relays send relay `relayId` (and every relay's moves) to
    /// `handler`, called on `eventLoop` in order. The future succeeds once the subscription is
    /// in place, so nothing published afterwards is missed.
    func subscribe(relayId: String, on eventLoop: EventLoop, _ handler: @escaping @Sendable (RelayStoreEvent) -> Void) -> EventLoopFuture<Void>

    /// Round trips made so far (for the relay's metrics).
    var roundTrips: Int { get }

    /// Checks that the store answers (before the relay starts listening).
    func ping() async throws

    /// The secret that keys the decoy challenges of users that do not exist: created once,
    /// the same for every relay of the store and across restarts (docs/PROTOCOL.md §4.2).
    func decoySecret() async throws -> [UInt8]

    /// Ends subscriptions and connections.
    func shutdown() async

    /// The Redis whose stored messages /metrics reports (`simp_inbox_*`, sampled in the
    /// background by the metrics endpoint on a connection of its own); nil for a store that
    /// is not Redis (the endpoint then reports no inbox figures).
    var inboxRedis: RedisEndpoint? { get }
}

extension RelayStore {
    public var inboxRedis: RedisEndpoint? { nil }
}

/// What the store hands a relay from other relays.
public enum RelayStoreEvent: Sendable, Equatable {
    /// A `RelayDelivery` envelope for one of this relay's users.
    case delivery(ByteBuffer)
    /// A user's session moved to another relay.
    case move(UserMove)
    /// Something arrived on a relay channel that is not a valid announcement.
    case malformed(String)
    /// The subscription is (again) in place; anything published while it was down was lost.
    case subscribed
}
