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
    /// Connections with the bound of requests waiting.
    private var full: Set<ConnectionID> = []
    /// Connections refused lately: not read until `until` (their frames read before that are
    /// refused without a word), for twice as long each time they are refused again within
    /// `forgivenAfter` of the last pause.
    private var penalties: [ConnectionID: Penalty] = [:]

    struct Penalty: Sendable {
        var until: NIODeadline
        var strikes: Int
        var reading: Bool
    }

    /// A connection refused nothing for this long starts again from the first pause.
    static let forgivenAfter: TimeAmount = .seconds(10)

    /// The first pause after a refusal, and the longest (doubling in between).
    static let firstPause: TimeAmount = .milliseconds(50)
    static let longestPause: TimeAmount = .seconds(2)

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

    /// A request of `connection` was refused at `now`: whether to tell its client (false while
    /// the connection is paused for an earlier refusal: what it sent meanwhile is dropped
    /// quietly), and whether reading the connection stops now.
    public mutating func refused(on connection: ConnectionID, now: NIODeadline) -> (tell: Bool, stopReading: Bool) {
        var penalty = penalties[connection] ?? Penalty(until: now, strikes: 0, reading: true)
        guard penalty.reading else { return (false, false) }
        let wasStopped = isStopped(connection)
        if now - penalty.until > Self.forgivenAfter { penalty.strikes = 0 }
        penalty.strikes += 1
        let pause = min(Self.firstPause.nanoseconds << Int64(min(penalty.strikes - 1, 20)), Self.longestPause.nanoseconds)
        penalty.until = now + .nanoseconds(pause)
        penalty.reading = false
        penalties[connection] = penalty
        return (true, !wasStopped)
    }

    /// When the next paused connection may be read again.
    public var nextPauseEnd: NIODeadline? { penalties.values.lazy.filter { !$0.reading }.map(\.until).min() }

    /// The connections whose pause ended by `now` and that may be read again.
    public mutating func pausesEnded(now: NIODeadline) -> [ConnectionID] {
        var resumed: [ConnectionID] = []
        for (connection, penalty) in penalties where !penalty.reading && penalty.until <= now {
            penalties[connection]?.reading = true
            if !isStopped(connection) { resumed.append(connection) }
        }
        return resumed.sorted { $0.rawValue < $1.rawValue }
    }

    private func isStopped(_ connection: ConnectionID) -> Bool {
        full.contains(connection) || penalties[connection]?.reading == false
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
        guard inFlight[connection]! >= limits.maxRequestsInFlight, !full.contains(connection) else { return false }
        let wasStopped = isStopped(connection)
        full.insert(connection)
        return !wasStopped
    }

    /// The store answered a request of `connection`: true when its reading, stopped, may go on.
    public mutating func answered(on connection: ConnectionID) -> Bool {
        guard let count = inFlight[connection] else { return false }
        inFlight[connection] = count > 1 ? count - 1 : nil
        guard count - 1 < limits.maxRequestsInFlight, full.contains(connection) else { return false }
        full.remove(connection)
        return !isStopped(connection)
    }

    /// `connection` closed: its waiting requests and pauses no longer count.
    public mutating func forget(_ connection: ConnectionID) {
        inFlight[connection] = nil
        full.remove(connection)
        penalties[connection] = nil
    }
}
