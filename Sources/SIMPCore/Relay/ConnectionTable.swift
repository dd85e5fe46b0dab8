import HeapModule
import NIOCore

/// The relay's control connections: where each comes from, how far its login got, and whether
/// its peer is alive. Admission (connections per address) is decided here too.
///
/// It is the one owner of a connection's phase (`Phase`): every change goes through `change`,
/// whose transitions are `Phase.after(_:)`'s. The other parts keep what they need and ask here:
/// `SessionTable` keeps sessions by id and by user, and finds a connection's session through
/// its phase; `RelayLogin` keeps the steps of a login under way on a connection awaiting one.
public struct ConnectionTable: Sendable {
    /// Where a connection stands:
    ///
    ///     awaitingLogin ──sessionStarted──▶ registering ──registered──▶ connected
    ///          ▲                                 │                          │
    ///          └───────registrationFailed────────┘                          │
    ///     awaitingLogin, registering, connected ──closing──▶ closing ◀───────┘
    ///
    /// and out of the table (`close`) from any phase. `registering` is kept boxed: inline, its
    /// CONNECTED message (hundreds of bytes) would size every connection's entry in the table,
    /// idle sessions' too.
    public enum Phase: Sendable, Equatable {
        /// Open, not logged in: a login may be under way (its steps are `RelayLogin`'s); closed
        /// at its login deadline. The only phase counted as not logged in.
        case awaitingLogin
        /// A login was accepted and session `session` of `user` started; the store is writing
        /// its registration, and `connected` goes out when it has.
        indirect case registering(user: String, session: UInt64, connected: SIMPMessage)
        /// Session `session` of `user` is connected: CONNECTED went out.
        case connected(user: String, session: UInt64)
        /// Its session ended (or it was refused) and the shell is closing it: nothing it sends
        /// is read any more, and it can log in no more.
        case closing

        /// The connection's session (registering or connected).
        public var session: UInt64? {
            switch self {
            case .registering(_, let session, _), .connected(_, let session): return session
            case .awaitingLogin, .closing: return nil
            }
        }

        /// Whether its session is connected (CONNECTED went out).
        public var isConnected: Bool {
            if case .connected = self { return true }
            return false
        }

        /// The phase `change` leads to from this one; nil when it is not a transition of this
        /// phase (a registration answered for a connection that is not registering, a login
        /// accepted on one that is closing…), and then nothing changes.
        public func after(_ change: Change) -> Phase? {
            switch (self, change) {
            case (.awaitingLogin, .sessionStarted(let user, let session, let connected)):
                return .registering(user: user, session: session, connected: connected)
            case (.registering(let user, let session, _), .registered):
                return .connected(user: user, session: session)
            case (.registering, .registrationFailed):
                return .awaitingLogin
            case (.awaitingLogin, .closing), (.registering, .closing), (.connected, .closing):
                return .closing
            default:
                return nil
            }
        }
    }

    /// What moves a connection from one phase to another (`Phase.after`).
    public enum Change: Sendable, Equatable {
        /// A login was accepted: session `session` of `user` starts, and its registration is
        /// written; `connected` is the CONNECTED to send once it is.
        indirect case sessionStarted(user: String, session: UInt64, connected: SIMPMessage)
        /// The store wrote the registration.
        case registered
        /// The store could not write it: the connection may log in again (a new login deadline).
        case registrationFailed
        /// The session ended (replaced, ended elsewhere, refused, the relay stopping): the
        /// connection is being closed.
        case closing
    }

    struct Connection: Sendable {
        var phase: Phase = .awaitingLogin
        /// The peer's IP address (rate limits are per address).
        var host: String
        /// Its peer's liveness under the table's one `heartbeat` policy.
        var liveness: Liveness
        /// The deadline of its live entry in `heartbeatsDue` (others for it are stale).
        var scheduled: NIODeadline
        /// When it is closed unless logged in by then (its live entry in `loginsDue`).
        var loginDeadline: NIODeadline
    }

    /// What `open` decided about a new connection.
    public struct Admission: Sendable, Equatable {
        /// Refuse it: its address must wait this long (too fast, too many, or too many not
        /// logged in).
        public var refuse: TimeAmount?
        /// Why it is refused.
        public var reason: RejectReason = .connectionRateLimited
        /// Close this connection, the oldest not logged in: the relay holds its maximum of them.
        public var evict: ConnectionID?
    }

    /// When a connection's heartbeat may next need attention; entries go stale when its peer
    /// speaks (checked and scheduled again when they come up), when a suspicion moves its
    /// deadline earlier (skipped: not its `scheduled` one) or when it closes (dropped then).
    private struct HeartbeatDue: Comparable, Sendable {
        let deadline: NIODeadline
        let id: ConnectionID
        static func < (a: HeartbeatDue, b: HeartbeatDue) -> Bool { a.deadline < b.deadline }
    }

    private var connections: [ConnectionID: Connection] = [:]
    /// Every open connection's next heartbeat deadline, so a check costs O(due), not
    /// O(connections); deadlines are rounded up to the policy's slot, so the connections due
    /// within one slot share one wake-up.
    private var heartbeatsDue = Heap<HeartbeatDue>()
    /// Connections not logged in, by login deadline (the oldest first); entries of those that
    /// logged in or closed are stale and skipped.
    private var loginsDue = Heap<HeartbeatDue>()
    private var connectionsPerHost: [String: Int] = [:]
    /// Connections not logged in, per address and in all.
    private var unauthenticatedPerHost: [String: Int] = [:]
    public private(set) var unauthenticated = 0
    private var connectionRates: RateLimiter<String>
    private let maxConnectionsPerHost: Int
    public let heartbeat: HeartbeatPolicy
    public let limits: RelayLimits

    public init(connectionLimit: RateLimit, maxConnectionsPerHost: Int, heartbeat: HeartbeatPolicy, limits: RelayLimits = .init()) {
        self.connectionRates = RateLimiter(connectionLimit)
        self.maxConnectionsPerHost = maxConnectionsPerHost
        self.heartbeat = heartbeat
        self.limits = limits
    }

    /// Open connections.
    public var count: Int { connections.count }
    /// Every open connection.
    public var ids: [ConnectionID] { Array(connections.keys) }

    /// Records a new connection from `host` and says whether to refuse it (the host opens
    /// connections too fast, holds too many, or too many that have not logged in) or to close
    /// the oldest connection not logged in to make room. The connection is recorded either
    /// way, and forgotten when it closes.
    public mutating func open(_ id: ConnectionID, host: String, now: NIODeadline) -> Admission {
        let liveness = Liveness(policy: heartbeat, now: now)
        let deadline = liveness.nextDeadline(policy: heartbeat)
        let loginDeadline = heartbeat.slotted(now + limits.loginTimeout)
        connections[id] = Connection(host: host, liveness: liveness, scheduled: deadline, loginDeadline: loginDeadline)
        heartbeatsDue.insert(HeartbeatDue(deadline: deadline, id: id))
        loginsDue.insert(HeartbeatDue(deadline: loginDeadline, id: id))
        countUnauthenticated(host, by: 1)
        connectionsPerHost[host, default: 0] += 1
        if connectionsPerHost[host]! > maxConnectionsPerHost { return Admission(refuse: .seconds(1)) }
        if unauthenticatedPerHost[host, default: 0] > limits.maxUnauthenticatedPerHost {
            return Admission(refuse: .seconds(1), reason: .unauthenticatedLimit)
        }
        if let wait = connectionRates.admit(host, now: now) { return Admission(refuse: wait) }
        guard unauthenticated > limits.maxUnauthenticated else { return Admission() }
        return Admission(evict: oldestUnauthenticated(except: id))
    }

    /// Why a connection from `host` would be refused now for what `host` already holds (its cap
    /// of connections, or of connections not logged in), or nil. Asked as a connection is
    /// accepted, before it is set up; `open` checks the same caps (and the rate) again.
    public func refusal(for host: String) -> (reason: RejectReason, detail: String)? {
        let open = connectionsPerHost[host, default: 0], waiting = unauthenticatedPerHost[host, default: 0]
        if open >= maxConnectionsPerHost { return (.connectionRateLimited, "\(open) open") }
        if waiting >= limits.maxUnauthenticatedPerHost { return (.unauthenticatedLimit, "\(waiting) not logged in") }
        return nil
    }

    /// Forgets a connection; returns the phase it was in (nil if it was not open).
    public mutating func close(_ id: ConnectionID) -> Phase? {
        guard let closed = connections.removeValue(forKey: id) else { return nil }
        connectionsPerHost[closed.host, default: 1] -= 1
        if connectionsPerHost[closed.host] == 0 { connectionsPerHost[closed.host] = nil }
        if closed.phase == .awaitingLogin { countUnauthenticated(closed.host, by: -1) }
        return closed.phase
    }

    private mutating func countUnauthenticated(_ host: String, by change: Int) {
        unauthenticated += change
        let count = unauthenticatedPerHost[host, default: 0] + change
        unauthenticatedPerHost[host] = count > 0 ? count : nil
    }

    /// Whether `id`'s entry in `loginsDue` is live: it has not logged in, and the entry is its own.
    private func awaitsLogin(_ due: HeartbeatDue) -> Bool {
        guard let connection = connections[due.id] else { return false }
        return connection.phase == .awaitingLogin && connection.loginDeadline == due.deadline
    }

    /// The oldest connection not logged in other than `id` (its entry is dropped).
    private mutating func oldestUnauthenticated(except id: ConnectionID) -> ConnectionID? {
        var skipped: [HeartbeatDue] = []
        defer { for due in skipped { loginsDue.insert(due) } }
        while let due = loginsDue.popMin() {
            guard awaitsLogin(due) else { continue }
            guard due.id != id else {
                skipped.append(due)
                continue
            }
            return due.id
        }
        return nil
    }

    /// When `pollLoginDeadlines` next has something to look at.
    public var nextLoginDeadline: NIODeadline? { loginsDue.min?.deadline }

    /// Connections that have not logged in by their deadline (to be closed).
    public mutating func pollLoginDeadlines(now: NIODeadline) -> [ConnectionID] {
        var late: [ConnectionID] = []
        while let due = loginsDue.min, due.deadline <= now {
            loginsDue.removeMin()
            if awaitsLogin(due) { late.append(due.id) }
        }
        return late.sorted { $0.rawValue < $1.rawValue }
    }

    public func phase(of id: ConnectionID) -> Phase? { connections[id]?.phase }
    public func host(of id: ConnectionID) -> String? { connections[id]?.host }

    /// The session on connection `id` (registering or connected).
    public func session(on id: ConnectionID) -> UInt64? { connections[id]?.phase.session }

    /// Moves connection `id` on by `change`, the one way its phase changes; returns its new
    /// phase, or nil (nothing changed) when `id` is not open or `change` is not a transition of
    /// its phase. A connection that goes back to awaiting a login (its registration failed)
    /// gets a new login deadline from `now`.
    @discardableResult
    public mutating func change(_ id: ConnectionID, _ change: Change, now: NIODeadline) -> Phase? {
        guard let index = connections.index(forKey: id), let next = connections.values[index].phase.after(change) else { return nil }
        let wasWaiting = connections.values[index].phase == .awaitingLogin, isWaiting = next == .awaitingLogin
        connections.values[index].phase = next
        guard wasWaiting != isWaiting else { return next }
        countUnauthenticated(connections.values[index].host, by: isWaiting ? 1 : -1)
        if isWaiting {
            let deadline = heartbeat.slotted(now + limits.loginTimeout)
            connections.values[index].loginDeadline = deadline
            loginsDue.insert(HeartbeatDue(deadline: deadline, id: id))
        }
        return next
    }

    /// A frame arrived on `id`: its peer is alive.
    public mutating func heard(_ id: ConnectionID, now: NIODeadline) {
        // Through the index, in place: `connections[id]?.liveness` moves the whole connection
        // out of the dictionary and back in a heap-allocated accessor frame (about 1,100
        // instructions per datagram in release, against about 200 this way).
        guard let index = connections.index(forKey: id) else { return }
        connections.values[index].liveness.heard(at: now)
    }

    /// When `id`'s peer was last heard.
    public func lastHeard(_ id: ConnectionID) -> NIODeadline? { connections[id]?.liveness.lastHeard }

    /// Content just went to `id`'s peer: if it has been silent for the policy's `suspectAfter`
    /// (and is not suspected already), returns true and the caller sends a PING; the peer is
    /// then given up unless heard within `answerWithin`.
    public mutating func suspect(_ id: ConnectionID, now: NIODeadline) -> Bool {
        guard let index = connections.index(forKey: id), connections.values[index].liveness.suspect(now: now, policy: heartbeat) else {
            return false
        }
        let deadline = connections.values[index].liveness.nextDeadline(policy: heartbeat)
        if deadline < connections.values[index].scheduled {
            connections.values[index].scheduled = deadline
            heartbeatsDue.insert(HeartbeatDue(deadline: deadline, id: id))
        }
        return true
    }

    /// When `pollHeartbeats` next has something to look at.
    public var nextHeartbeatDeadline: NIODeadline? { heartbeatsDue.min?.deadline }

    /// Connections to ping now, and connections whose peer went silent (their phases are
    /// kept until `close`).
    public mutating func pollHeartbeats(now: NIODeadline) -> (ping: [ConnectionID], dead: [ConnectionID]) {
        var ping: [ConnectionID] = [], dead: [ConnectionID] = []
        while let due = heartbeatsDue.min, due.deadline <= now {
            heartbeatsDue.removeMin()
            guard let index = connections.index(forKey: due.id), connections.values[index].scheduled == due.deadline else { continue }
            switch connections.values[index].liveness.poll(now: now, policy: heartbeat) {
            case .none: break
            case .sendPing: ping.append(due.id)
            case .peerDead:
                dead.append(due.id)
                continue
            }
            let next = connections.values[index].liveness.nextDeadline(policy: heartbeat)
            connections.values[index].scheduled = next
            heartbeatsDue.insert(HeartbeatDue(deadline: next, id: due.id))
        }
        return (ping.sorted { $0.rawValue < $1.rawValue }, dead.sorted { $0.rawValue < $1.rawValue })
    }
}
