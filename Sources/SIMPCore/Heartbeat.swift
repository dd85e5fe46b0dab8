import NIOCore

/// When a control connection is probed and how much silence means it is dead.
public struct HeartbeatPolicy: Sendable, Equatable {
    /// A PING is sent after this long without any frame from the peer (and again every
    /// interval while the silence lasts); a connection with traffic is never pinged.
    public var interval: TimeAmount
    /// The peer is dead after `missLimit` intervals without any frame from it.
    public var missLimit: Int

    public init(interval: TimeAmount, missLimit: Int = 2) {
        self.interval = interval
        self.missLimit = missLimit
    }

    /// The relay's default: a client silent for 30 s is pinged, and given up after 60 s of
    /// silence (docs/PROTOCOL.md §4.4).
    public static let relay = HeartbeatPolicy(interval: .seconds(30), missLimit: 2)
    /// The reference client's default: it pings a relay silent for 25 s (so a relay at its
    /// defaults hears the client before its own 30 s are up and never pings it) and gives the
    /// relay up after 50 s of silence.
    public static let client = HeartbeatPolicy(interval: .seconds(25), missLimit: 2)

    /// Silence after which the peer is declared dead.
    public var deadAfter: TimeAmount { .nanoseconds(interval.nanoseconds * Int64(missLimit)) }
}

/// Liveness of one control connection, seen from one end: send a PING when the peer has been
/// silent for an interval (any frame counts: traffic is liveness, so a busy connection costs no
/// PING), again every interval while the silence lasts, and declare the peer dead when nothing
/// at all (PONG, PING or any other frame) was heard for `missLimit` intervals.
public struct Heartbeat: Sendable, Equatable {
    /// What the connection's owner must do now.
    public enum Action: Equatable, Sendable {
        case none
        case sendPing
        case peerDead
    }

    public let policy: HeartbeatPolicy
    public private(set) var lastHeard: NIODeadline
    private var nextPing: NIODeadline

    public init(policy: HeartbeatPolicy, now: NIODeadline) {
        self.policy = policy
        self.lastHeard = now
        self.nextPing = now + policy.interval
    }

    /// Any frame arrived from the peer.
    public mutating func heard(at now: NIODeadline) {
        lastHeard = max(lastHeard, now)
    }

    /// Call at `nextDeadline` (or any time): says whether to ping or give the peer up.
    public mutating func poll(now: NIODeadline) -> Action {
        if now - lastHeard >= policy.deadAfter { return .peerDead }
        guard now >= nextPing, now - lastHeard >= policy.interval else { return .none }
        nextPing = now + policy.interval
        return .sendPing
    }

    /// When `poll` next has something to say.
    public var nextDeadline: NIODeadline { min(max(nextPing, lastHeard + policy.interval), lastHeard + policy.deadAfter) }
}
