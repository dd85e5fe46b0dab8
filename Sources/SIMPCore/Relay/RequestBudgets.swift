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
    /// Connections refused lately: not read until `until`, for twice as long each time they
    /// are refused again within `forgivenAfter` of the last pause. The requests refused during
    /// a pause (the one that started it, and those read with it) are told in one ERROR when
    /// the pause ends (`owed`).
    private var penalties: [ConnectionID: Penalty] = [:]

    struct Penalty: Sendable {
        var until: NIODeadline
        var strikes: Int
        var reading: Bool
        var owed: OwedRefusal?
    }

    /// The one ERROR RATE_LIMITED a pause owes its connection's client: every request refused
    /// while it lasted, and when the latest of them may be tried again.
    public struct OwedRefusal: Sendable, Equatable {
        /// The user whose requests were refused.
        public var user: String
        /// The first refused request's kind and what refused it.
        public var kind: ControlRequestKind
        public var whose: String
        /// When every refused request may be tried again.
        public var retryAt: NIODeadline
        /// The refused requests' ids, ascending (at most `maxIdsPerRefusal`).
        public var ids: [UInt64]
        /// How many requests were refused (listed or not).
        public var count = 1
    }

    /// Request ids one ERROR lists at most (a client that sent more in one read than this was
    /// not waiting for answers).
    public static let maxIdsPerRefusal = 256

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

    /// Request `id` of `user` on `connection` was refused at `now` (`refusal`): it is owed to
    /// the client in the pause's one ERROR. Returns whether this refusal starts a pause, and
    /// whether reading the connection stops now.
    public mutating func refused(
        _ id: UInt64, kind: ControlRequestKind, user: String, _ refusal: Refusal, on connection: ConnectionID, now: NIODeadline
    ) -> (startsPause: Bool, stopReading: Bool) {
        var penalty = penalties[connection] ?? Penalty(until: now, strikes: 0, reading: true)
        let retryAt = now + refusal.retryAfter
        guard penalty.reading else {
            penalty.owed?.add(id, retryAt: retryAt)
            penalties[connection] = penalty
            return (false, false)
        }
        let wasStopped = isStopped(connection)
        if now - penalty.until > Self.forgivenAfter { penalty.strikes = 0 }
        penalty.strikes += 1
        let pause = min(Self.firstPause.nanoseconds << Int64(min(penalty.strikes - 1, 20)), Self.longestPause.nanoseconds)
        penalty.until = now + .nanoseconds(pause)
        penalty.reading = false
        penalty.owed = OwedRefusal(user: user, kind: kind, whose: refusal.whose, retryAt: retryAt, ids: [id])
        penalties[connection] = penalty
        return (true, !wasStopped)
    }

    /// When the next paused connection may be read again.
    public var nextPauseEnd: NIODeadline? { penalties.values.lazy.filter { !$0.reading }.map(\.until).min() }

    /// The connections whose pause ended by `now`, in id order: the refusal each owes its
    /// client, and whether it may be read again.
    public mutating func pausesEnded(now: NIODeadline) -> [(connection: ConnectionID, owed: OwedRefusal?, resume: Bool)] {
        var ended: [(connection: ConnectionID, owed: OwedRefusal?, resume: Bool)] = []
        for (connection, penalty) in penalties where !penalty.reading && penalty.until <= now {
            penalties[connection]?.reading = true
            penalties[connection]?.owed = nil
            ended.append((connection, penalty.owed, !isStopped(connection)))
        }
        return ended.sorted { $0.connection.rawValue < $1.connection.rawValue }
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

extension RequestBudgets.OwedRefusal {
    /// Another request refused during the same pause.
    mutating func add(_ id: UInt64, retryAt: NIODeadline) {
        self.retryAt = max(self.retryAt, retryAt)
        count += 1
        guard ids.count < RequestBudgets.maxIdsPerRefusal else { return }
        let index = ids.firstIndex { $0 >= id } ?? ids.endIndex
        if index == ids.endIndex || ids[index] != id { ids.insert(id, at: index) }
    }
}
