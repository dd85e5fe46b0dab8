import NIOCore

/// Routes to users who have no session on this relay: what the store said (cached for a
/// while), and the payloads waiting while it is asked. Moves, unheard deliveries and a new
/// subscription invalidate the cache.
public struct RouteTable: Sendable {
    /// What the store said about a user without a session here.
    public struct CachedRoute: Sendable, Equatable {
        /// The user's sessions and devices.
        public var routes: UserRoutes
        public var expires: NIODeadline
        /// The route of the user's one receiving session, if that is where content goes
        /// straight (one known device, online): the fast path.
        public var route: Route? {
            routes.knownDevices <= 1 && routes.receivers.count == 1 ? routes.receivers[0] : nil
        }
        /// Whether the user is known (offline, not unknown).
        public var known: Bool { routes.known || !routes.receivers.isEmpty }
    }

    /// What became of a payload handed to `route(_:to:now:)`.
    public enum Decision: Sendable, Equatable {
        /// The cache answers.
        case cached(CachedRoute)
        /// The first payload waiting for this user: ask the store.
        case lookUp
        /// It waits behind a lookup already under way.
        case waiting
        /// Too many payloads already wait for this user: dropped.
        case backlogFull
    }

    /// A payload waiting for its recipient's lookup, with the session of this relay that sent
    /// it (nil when no session did): an error about it goes to that session only
    /// (docs/PROTOCOL.md §4.3).
    public struct Waiting: Sendable, Equatable {
        public var payload: RelayDelivery.Payload
        public var sender: UInt64?
        public init(_ payload: RelayDelivery.Payload, sender: UInt64? = nil) {
            self.payload = payload
            self.sender = sender
        }
    }

    private var cache: [String: CachedRoute] = [:]
    private var awaitingLookup: [String: [Waiting]] = [:]
    /// When the store last said each user exists, kept for `knownMemory`.
    private var lastKnown: [String: NIODeadline] = [:]
    /// `lastKnown`'s size at which expired entries are next swept out.
    private var lastKnownSweepAt = 1024
    public let cacheTTL: TimeAmount
    public let unknownUserCacheTTL: TimeAmount
    public let maxAwaitingLookup: Int
    /// How long a user the store knew is remembered: an "unknown" answer within it means the
    /// store lost the user's keys (a Redis failover drops writes not yet replicated), not that
    /// the user does not exist. The user's relay writes them again at its next refresh.
    public let knownMemory: TimeAmount

    public init(cacheTTL: TimeAmount, unknownUserCacheTTL: TimeAmount, maxAwaitingLookup: Int, knownMemory: TimeAmount = .seconds(30)) {
        self.cacheTTL = cacheTTL
        self.unknownUserCacheTTL = unknownUserCacheTTL
        self.maxAwaitingLookup = maxAwaitingLookup
        self.knownMemory = knownMemory
    }

    /// Whether `answer` says `user` does not exist although the store knew the user within
    /// `knownMemory`: the store lost the keys, so the payloads waiting for the lookup should
    /// be retried by their senders rather than refused as addressed to nobody.
    public func contradictsRecentAnswers(_ answer: UserRoutes, about user: String, now: NIODeadline) -> Bool {
        guard !answer.exists, let known = lastKnown[user] else { return false }
        return known + knownMemory > now
    }

    /// Whether the store said, within the cache's life, that `user` has a receiving session
    /// online on some relay.
    public func hasReceivers(_ user: String, now: NIODeadline) -> Bool {
        guard let cached = cache[user], cached.expires > now else { return false }
        return !cached.routes.receivers.isEmpty
    }

    /// What the store said of `user`'s sessions, if within the cache's life.
    public func cachedRoutes(of user: String, now: NIODeadline) -> UserRoutes? {
        guard let cached = cache[user], cached.expires > now else { return nil }
        return cached.routes
    }

    /// Starts a lookup of `user` that no payload waits for, unless one is under way: whether
    /// to ask the store (its answer fills the cache, `lookedUp`).
    public mutating func beginLookup(of user: String) -> Bool {
        guard awaitingLookup[user] == nil else { return false }
        awaitingLookup[user] = []
        return true
    }

    /// Payloads held while their recipients' routes are looked up.
    public var awaitingCount: Int { awaitingLookup.values.reduce(0) { $0 + $1.count } }

    /// Decides from the cache, or queues `payload` (sent by session `sender`) until the store answers.
    public mutating func route(_ payload: RelayDelivery.Payload, to user: String, sender: UInt64? = nil, now: NIODeadline) -> Decision {
        if let cached = cache[user], cached.expires > now { return .cached(cached) }
        let payload = Waiting(payload, sender: sender)
        guard var queue = awaitingLookup[user] else {
            awaitingLookup[user] = [payload]
            return .lookUp
        }
        guard queue.count < maxAwaitingLookup else { return .backlogFull }
        queue.append(payload)
        awaitingLookup[user] = queue
        return .waiting
    }

    /// The store answered a lookup: caches it and returns the payloads that waited.
    public mutating func lookedUp(_ user: String, route: Route?, known: Bool, now: NIODeadline) -> (CachedRoute, [Waiting]) {
        let routes = UserRoutes(receivers: route.map { [$0] } ?? [], relays: route.map { [$0.relayId] } ?? [], knownDevices: 1, known: known)
        return lookedUp(user, routes: routes, now: now)
    }

    /// The store answered a lookup with the user's sessions and devices: caches it and returns
    /// the payloads that waited.
    public mutating func lookedUp(_ user: String, routes: UserRoutes, now: NIODeadline) -> (CachedRoute, [Waiting]) {
        let cached = CachedRoute(routes: routes, expires: now + (routes.relays.isEmpty ? unknownUserCacheTTL : cacheTTL))
        cache[user] = cached
        if routes.exists { rememberKnown(user, now: now) }
        return (cached, awaitingLookup.removeValue(forKey: user) ?? [])
    }

    private mutating func rememberKnown(_ user: String, now: NIODeadline) {
        lastKnown[user] = now
        guard lastKnown.count >= lastKnownSweepAt else { return }
        lastKnown = lastKnown.filter { $0.value + knownMemory > now }
        lastKnownSweepAt = max(1024, lastKnown.count * 2)
    }

    /// A lookup failed (or its user connected here meanwhile): the payloads that waited.
    public mutating func takeWaiting(for user: String) -> [Waiting] {
        awaitingLookup.removeValue(forKey: user) ?? []
    }

    /// `user` moved (or connected here): its cached route is stale.
    public mutating func forget(_ user: String) {
        cache[user] = nil
    }

    /// Relay `relay` is gone: every route through it is stale.
    public mutating func forgetRoutes(through relay: String) {
        cache = cache.filter { !$0.value.routes.relays.contains(relay) }
    }

    /// Moves may have been missed: every cached route is stale.
    public mutating func forgetAll() {
        cache.removeAll()
    }
}

extension UserRoutes {
    /// Whether the answer says the user exists: known to the store, or with a live session.
    public var exists: Bool { known || !receivers.isEmpty || !relays.isEmpty }
}
