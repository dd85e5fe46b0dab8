import NIOCore

/// What each connection and each user may still ask of the relay (`RelayLimits`): a token
/// bucket per control request kind and connection, one per kind and user (twice the
/// connection's, over all the user's connections here; logins are counted per user only),
/// one per pair of users for one-time prekey claims, and the store requests each connection
/// has waiting for their answers.
public struct RequestBudgets: Sendable {
    public let limits: RelayLimits
    private var perConnection: [ControlRequestKind: RateLimiter<ConnectionID>] = [:]
    private var perUser: [ControlRequestKind: RateLimiter<String>] = [:]
    private var prekeyClaims: RateLimiter<String>
    private var inFlight: [ConnectionID: Int] = [:]
    /// Connections the shell was told to stop reading.
    private var paused: Set<ConnectionID> = []

    public init(_ limits: RelayLimits) {
        self.limits = limits
        self.prekeyClaims = RateLimiter(limits.prekeyClaims)
        for kind in ControlRequestKind.allCases {
            let budget = limits.budget(kind)
            perConnection[kind] = RateLimiter(budget)
            perUser[kind] = RateLimiter(kind == .login ? budget : RateLimit(perSecond: 2 * budget.perSecond, burst: 2 * budget.burst))
        }
    }

    /// What refused a request, and when trying again may succeed.
    public struct Refusal: Sendable, Equatable {
        public var retryAfter: TimeAmount
        /// "this connection", "alice", "alice's claims of bob's prekeys", …
        public var whose: String
    }

    /// Spends one `kind` request of `user` on `connection` (nil: a login, counted per user only).
    public mutating func spend(_ kind: ControlRequestKind, user: String, on connection: ConnectionID?, now: NIODeadline) -> Refusal? {
        if let connection, kind != .login, let wait = perConnection[kind]!.admit(connection, now: now) {
            return Refusal(retryAfter: wait, whose: "this connection")
        }
        if let wait = perUser[kind]!.admit(user, now: now) { return Refusal(retryAfter: wait, whose: user) }
        return nil
    }

    /// `asker` fetches `target`'s bundles, claiming one-time prekeys of its devices.
    public mutating func claimPrekeys(of target: String, by asker: String, now: NIODeadline) -> Refusal? {
        guard let wait = prekeyClaims.admit("\(asker)\u{0}\(target)", now: now) else { return nil }
        return Refusal(retryAfter: wait, whose: "\(asker)'s fetches of \(target)'s keys")
    }

    // MARK: Requests waiting for the store

    /// Whether `connection` already has so many requests waiting (twice the bound: the shell
    /// stopped reading at the bound, these were read before it did) that one more is refused.
    public func isFull(_ connection: ConnectionID) -> Bool {
        inFlight[connection, default: 0] >= 2 * limits.maxRequestsInFlight
    }

    /// Requests of `connection` waiting for the store.
    public func waiting(on connection: ConnectionID) -> Int { inFlight[connection, default: 0] }

    /// A request of `connection` went to the store: true when the connection now has the
    /// bound waiting and its reading is to stop.
    public mutating func sent(on connection: ConnectionID) -> Bool {
        inFlight[connection, default: 0] += 1
        guard inFlight[connection]! >= limits.maxRequestsInFlight, !paused.contains(connection) else { return false }
        paused.insert(connection)
        return true
    }

    /// The store answered a request of `connection`: true when its reading, stopped, may go on.
    public mutating func answered(on connection: ConnectionID) -> Bool {
        guard let count = inFlight[connection] else { return false }
        inFlight[connection] = count > 1 ? count - 1 : nil
        guard count - 1 < limits.maxRequestsInFlight, paused.contains(connection) else { return false }
        paused.remove(connection)
        return true
    }

    /// `connection` closed: its waiting requests no longer count.
    public mutating func forget(_ connection: ConnectionID) {
        inFlight[connection] = nil
        paused.remove(connection)
    }
}
