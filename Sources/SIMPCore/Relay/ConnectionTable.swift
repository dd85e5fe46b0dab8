import HeapModule
import NIOCore

/// The relay's control connections: where each comes from, how far its login got, and whether
/// its peer is alive. Admission (connections per address) is decided here too.
public struct ConnectionTable: Sendable {
    /// Where a connection stands: no session yet (a login may be under way in `RelayLogin`),
    /// a session waiting for the store to register it, or a session. `registering` is kept
    /// boxed: inline, its CONNECTED message (hundreds of bytes) would size every connection's
    /// entry in the table, idle sessions' too.
    public enum Phase: Sendable, Equatable {
        case awaitingLogin
        indirect case registering(user: String, connected: SIMPMessage)
        case connected(user: String)

        /// The user a session was started for (registering or connected).
        public var sessionUser: String? {
            switch self {
            case .registering(let user, _), .connected(let user): return user
            case .awaitingLogin: return nil
            }
        }
    }

    struct Connection: Sendable {
        var phase: Phase = .awaitingLogin
        /// The peer's IP address (rate limits are per address).
        var host: String
        /// Its peer's liveness under the table's one `heartbeat` policy.
        var liveness: Liveness
        /// The deadline of its live entry in `heartbeatsDue` (others for it are stale).
        var scheduled: NIODeadline
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
    private var connectionsPerHost: [String: Int] = [:]
    private var connectionRates: RateLimiter<String>
    private let maxConnectionsPerHost: Int
    public let heartbeat: HeartbeatPolicy

    public init(connectionLimit: RateLimit, maxConnectionsPerHost: Int, heartbeat: HeartbeatPolicy) {
        self.connectionRates = RateLimiter(connectionLimit)
        self.maxConnectionsPerHost = maxConnectionsPerHost
        self.heartbeat = heartbeat
    }

    /// Open connections.
    public var count: Int { connections.count }
    /// Every open connection.
    public var ids: [ConnectionID] { Array(connections.keys) }

    /// Records a new connection from `host`; returns how long the host must wait when it opens
    /// connections too fast or holds too many (the connection is recorded either way, and
    /// forgotten when it closes).
    public mutating func open(_ id: ConnectionID, host: String, now: NIODeadline) -> TimeAmount? {
        let liveness = Liveness(policy: heartbeat, now: now)
        let deadline = liveness.nextDeadline(policy: heartbeat)
        connections[id] = Connection(host: host, liveness: liveness, scheduled: deadline)
        heartbeatsDue.insert(HeartbeatDue(deadline: deadline, id: id))
        connectionsPerHost[host, default: 0] += 1
        if connectionsPerHost[host]! > maxConnectionsPerHost { return .seconds(1) }
        return connectionRates.admit(host, now: now)
    }

    /// Forgets a connection; returns the phase it was in (nil if it was not open).
    public mutating func close(_ id: ConnectionID) -> Phase? {
        guard let closed = connections.removeValue(forKey: id) else { return nil }
        connectionsPerHost[closed.host, default: 1] -= 1
        if connectionsPerHost[closed.host] == 0 { connectionsPerHost[closed.host] = nil }
        return closed.phase
    }

    public func phase(of id: ConnectionID) -> Phase? { connections[id]?.phase }
    public func host(of id: ConnectionID) -> String? { connections[id]?.host }

    public mutating func setPhase(_ phase: Phase, of id: ConnectionID) {
        connections[id]?.phase = phase
    }

    /// A frame arrived on `id`: its peer is alive.
    public mutating func heard(_ id: ConnectionID, now: NIODeadline) {
        connections[id]?.liveness.heard(at: now)
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
