import NIOCore

/// When a control connection is probed and how much silence means it is dead.
public struct HeartbeatPolicy: Sendable, Equatable {
    /// A PING is sent after this long without any frame from the peer (and again every
    /// interval while the silence lasts); a connection with traffic is never pinged.
    public var interval: TimeAmount
    /// The peer is dead after `missLimit` intervals without any frame from it.
    public var missLimit: Int
    /// Suspicion: when the peer should soon have something to say (content just went to it)
    /// and it has been silent this long, a PING goes at once (`Heartbeat.suspect`), and the
    /// peer is dead if nothing is heard within `answerWithin` of it. nil: never suspected,
    /// only the interval counts.
    public var suspectAfter: TimeAmount?
    /// How long a suspected peer has to say anything after its PING.
    public var answerWithin: TimeAmount
    /// Deadlines are rounded up to a multiple of this, so that the connections due within one
    /// slot share one wake-up (`.zero`: each at its own time).
    public var slot: TimeAmount

    public init(
        interval: TimeAmount, missLimit: Int = 2, suspectAfter: TimeAmount? = nil, answerWithin: TimeAmount = .seconds(10),
        slot: TimeAmount = .zero
    ) {
        self.interval = interval
        self.missLimit = missLimit
        self.suspectAfter = suspectAfter
        self.answerWithin = answerWithin
        self.slot = slot
    }

    /// The relay's default (docs/PROTOCOL.md §4.4): an idle client silent for 2 min is pinged
    /// and given up after 4 min of silence, but one that content is forwarded to after 5 s of
    /// silence is pinged at once and given up 10 s later if it stays silent. Pings due within
    /// the same second share one wake-up.
    public static let relay = HeartbeatPolicy(
        interval: .seconds(120), missLimit: 2, suspectAfter: .seconds(5), answerWithin: .seconds(10), slot: .seconds(1))
    /// The reference client's default: it pings a relay silent for 110 s (so a relay at its
    /// defaults hears the client before its own 120 s are up and never pings it) and gives the
    /// relay up after 220 s of silence; a message sent after 5 s of silence from the relay
    /// pings it at once, and the relay is given up 10 s later if it stays silent.
    public static let client = HeartbeatPolicy(interval: .seconds(110), missLimit: 2, suspectAfter: .seconds(5), answerWithin: .seconds(10))

    /// Silence after which the peer is declared dead.
    public var deadAfter: TimeAmount { .nanoseconds(interval.nanoseconds * Int64(missLimit)) }

    /// `deadline` rounded up to the next multiple of `slot`.
    func slotted(_ deadline: NIODeadline) -> NIODeadline {
        let slot = UInt64(max(0, self.slot.nanoseconds))
        guard slot > 0 else { return deadline }
        let nanoseconds = deadline.uptimeNanoseconds
        let remainder = nanoseconds % slot
        guard remainder > 0, nanoseconds <= UInt64.max - slot else { return deadline }
        return .uptimeNanoseconds(nanoseconds - remainder + slot)
    }
}

/// The liveness state of one connection without its policy (which the owner keeps once for
/// all its connections): when the peer was last heard, when the next PING is due, and when a
/// suspected peer must have answered.
public struct Liveness: Sendable, Equatable {
    public private(set) var lastHeard: NIODeadline
    private var nextPing: NIODeadline
    /// A suspicion PING went out: the peer is dead at this time unless heard first
    /// (`distantFuture`: not suspected; a sentinel rather than an optional keeps the state in
    /// 24 bytes, one per connection).
    private var answerDue = NIODeadline.distantFuture

    public init(policy: HeartbeatPolicy, now: NIODeadline) {
        self.lastHeard = now
        self.nextPing = now + policy.interval
    }

    /// Any frame arrived from the peer.
    public mutating func heard(at now: NIODeadline) {
        lastHeard = max(lastHeard, now)
        answerDue = .distantFuture
    }

    /// Content just went to the peer: if it has been silent for `suspectAfter` and is not
    /// already suspected, it is now, and the caller sends a PING (true).
    public mutating func suspect(now: NIODeadline, policy: HeartbeatPolicy) -> Bool {
        guard let after = policy.suspectAfter, answerDue == .distantFuture, now - lastHeard >= after else { return false }
        answerDue = now + policy.answerWithin
        return true
    }

    /// Call at `nextDeadline` (or any time): says whether to ping or give the peer up.
    public mutating func poll(now: NIODeadline, policy: HeartbeatPolicy) -> Heartbeat.Action {
        if now - lastHeard >= policy.deadAfter { return .peerDead }
        if now >= answerDue { return .peerDead }
        guard now >= nextPing, now - lastHeard >= policy.interval else { return .none }
        nextPing = now + policy.interval
        return .sendPing
    }

    /// When `poll` next has something to say (rounded up to the policy's slot).
    public func nextDeadline(policy: HeartbeatPolicy) -> NIODeadline {
        policy.slotted(min(max(nextPing, lastHeard + policy.interval), lastHeard + policy.deadAfter, answerDue))
    }
}

/// Liveness of one control connection, seen from one end: send a PING when the peer has been
/// silent for an interval (any frame counts: traffic is liveness, so a busy connection costs no
/// PING), again every interval while the silence lasts, and declare the peer dead when nothing
/// at all (PONG, PING or any other frame) was heard for `missLimit` intervals, or for
/// `answerWithin` after a suspicion PING (`suspect`).
public struct Heartbeat: Sendable, Equatable {
    /// What the connection's owner must do now.
    public enum Action: Equatable, Sendable {
        case none
        case sendPing
        case peerDead
    }

    public let policy: HeartbeatPolicy
    public private(set) var liveness: Liveness

    public init(policy: HeartbeatPolicy, now: NIODeadline) {
        self.policy = policy
        self.liveness = Liveness(policy: policy, now: now)
    }

    /// When the peer was last heard.
    public var lastHeard: NIODeadline { liveness.lastHeard }

    /// Any frame arrived from the peer.
    public mutating func heard(at now: NIODeadline) {
        liveness.heard(at: now)
    }

    /// Content just went to the peer: true if a PING must go now (see `Liveness.suspect`).
    public mutating func suspect(now: NIODeadline) -> Bool {
        liveness.suspect(now: now, policy: policy)
    }

    /// Call at `nextDeadline` (or any time): says whether to ping or give the peer up.
    public mutating func poll(now: NIODeadline) -> Action {
        liveness.poll(now: now, policy: policy)
    }

    /// When `poll` next has something to say.
    public var nextDeadline: NIODeadline { liveness.nextDeadline(policy: policy) }
}
