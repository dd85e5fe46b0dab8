import NIOConcurrencyHelpers
import NIOCore
import SIMPCore

/// A `RelayStore` in memory, for tests of the relay without `redis-server` and for the
/// simulator. Several relays may share one (their deliveries and moves go through it, as
/// through Redis pub/sub). It can be made unavailable, and emptied, like a Redis that stops
/// and restarts without persistence.
public final class InMemoryRelayStore: RelayStore {
    private struct Subscriber {
        var eventLoop: EventLoop
        var handler: @Sendable (RelayStoreEvent) -> Void
    }

    private struct Shared {
        var state: MemoryStoreState
        var subscribers: [String: Subscriber] = [:]
        var available = true
        var roundTrips = 0
        var decoySecret = LoginCrypto.randomBytes(32)
        var locked: Set<String> = []
    }

    private let shared: NIOLockedValueBox<Shared>
    /// Milliseconds since the epoch, as the store stamps stored messages and presence.
    private let clock: @Sendable () -> Int64

    public init(limits: RedisRelayStore.Limits = .init(), clock: @escaping @Sendable () -> Int64 = WallClock.millisecondsSinceEpoch) {
        self.shared = NIOLockedValueBox(Shared(state: MemoryStoreState(limits: limits)))
        self.clock = clock
    }

    /// Creates or replaces `user`'s password verifier.
    public func addUser(_ user: String, verifier: PasswordVerifier) {
        shared.withLockedValue { $0.state.credentials[user] = verifier }
    }

    /// Locks or unlocks `user` (as `simp-server user lock|unlock`).
    public func setLocked(_ user: String, _ locked: Bool) {
        shared.withLockedValue { shared in
            if locked { shared.locked.insert(user) } else { shared.locked.remove(user) }
        }
    }

    public func decoySecret() async throws -> [UInt8] {
        try await ping()
        return shared.withLockedValue { $0.decoySecret }
    }

    /// Whether requests succeed; while false every request fails, as with Redis down.
    public var isAvailable: Bool {
        get { shared.withLockedValue { $0.available } }
        set { shared.withLockedValue { $0.available = newValue } }
    }

    /// Forgets everything but credentials and subscriptions (a Redis restarted without persistence).
    public func reset() {
        shared.withLockedValue { shared in
            let credentials = shared.state.credentials
            shared.state = MemoryStoreState(limits: shared.state.limits)
            shared.state.credentials = credentials
        }
    }

    /// Stored messages `user`'s `device` (the default device "" if nil) has not receipted.
    public func inbox(of user: String, device: String? = nil) -> [InboxEntry] {
        shared.withLockedValue { $0.state.logs[user]?.pending(for: device ?? "") ?? [] }
    }

    /// Entries in `user`'s log (what some device of the user has not received).
    public func storedCount(of user: String) -> Int {
        shared.withLockedValue { $0.state.logs[user]?.count ?? 0 }
    }

    /// The registration the store holds for `user`'s newest receiving session.
    public func registration(of user: String) -> Registration? {
        shared.withLockedValue { shared in
            shared.state.newestSession[user].flatMap { shared.state.registrations[user]?[$0] }
        }
    }

    /// The registrations of every live session of `user`, by token.
    public func registrations(of user: String) -> [Registration] {
        shared.withLockedValue { ($0.state.registrations[user] ?? [:]).values.sorted { $0.session < $1.session } }
    }

    public var roundTrips: Int { shared.withLockedValue { $0.roundTrips } }

    public func ping() async throws {
        guard isAvailable else { throw StoreFailure("the in-memory store is unavailable") }
    }

    public func perform(_ request: StoreRequest, on eventLoop: EventLoop) -> EventLoopFuture<StoreAnswer> {
        let now = clock()
        let outcome: Result<StoreAnswer, StoreFailure> = shared.withLockedValue { shared in
            guard shared.available else { return .failure(StoreFailure("the in-memory store is unavailable")) }
            shared.roundTrips += 1
            switch request {
            case .publish(let relay, let delivery):
                guard let subscriber = shared.subscribers[relay] else { return .success(.publish(relay: relay, delivery, listeners: 0)) }
                let encoded = delivery.encoded()
                subscriber.eventLoop.execute { subscriber.handler(.delivery(encoded)) }
                return .success(.publish(relay: relay, delivery, listeners: 1))
            case .fetchVerifier(let user, let connection, _):
                let counts = shared.state.credentials.values.reduce(into: [UInt32: Int]()) { $0[$1.iterations, default: 0] += 1 }
                return .success(
                    .fetchVerifier(
                        connection: connection, shared.state.credentials[user], locked: shared.locked.contains(user), iterationCounts: counts))
            case .announceMove(let move):
                for (relayId, subscriber) in shared.subscribers where relayId != move.relayId {
                    subscriber.eventLoop.execute { subscriber.handler(.move(move)) }
                }
                return .success(.written)
            default:
                return .success(shared.state.answer(request, now: now))
            }
        }
        return eventLoop.makeCompletedFuture(outcome.mapError { $0 as Error })
    }

    public func subscribe(relayId: String, on eventLoop: EventLoop, _ handler: @escaping @Sendable (RelayStoreEvent) -> Void) -> EventLoopFuture<Void>
    {
        shared.withLockedValue { $0.subscribers[relayId] = Subscriber(eventLoop: eventLoop, handler: handler) }
        eventLoop.execute { handler(.subscribed) }
        return eventLoop.makeSucceededVoidFuture()
    }

    public func shutdown() async {}
}
