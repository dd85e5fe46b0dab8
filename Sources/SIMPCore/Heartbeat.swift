import NIOCore

/// How often a control connection is probed and how many silent intervals mean it is dead.
public struct HeartbeatPolicy: Sendable, Equatable {
    /// A PING is sent every `interval`.
    public var interval: TimeAmount
    /// The peer is dead after `missLimit` intervals without any frame from it.
    public var missLimit: Int

    public init(interval: TimeAmount = .seconds(5), missLimit: Int = 3) {
        self.interval = interval
        self.missLimit = missLimit
    }

    /// Silence after which the peer is declared dead.
    public var deadAfter: TimeAmount { .nanoseconds(interval.nanoseconds * Int64(missLimit)) }
}

/// Liveness of one control connection, seen from one end: send a PING every interval, and
/// declare the peer dead when nothing at all (PONG, PING or any other frame) was heard for
/// `missLimit` intervals.
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
        guard now >= nextPing else { return .none }
        nextPing = now + policy.interval
        return .sendPing
    }

    /// When `poll` next has something to say.
    public var nextDeadline: NIODeadline { min(nextPing, lastHeard + policy.deadAfter) }
}
