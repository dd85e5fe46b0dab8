import NIOCore

/// The way a client's sealed datagrams go to the relay (docs/PROTOCOL.md §5.5).
public enum DatagramPath: String, Equatable, Sendable {
    /// As UDP datagrams, to the relay's UDP port.
    case udp
    /// In DATAGRAM frames on the control connection, because UDP does not get through.
    case control
}

/// When a client moves its datagrams to the control connection and back (docs/PROTOCOL.md §5.5).
public struct DatagramPathPolicy: Equatable, Sendable {
    /// A round of HELLO probes (one every `ClientSession.Configuration.helloInterval`) with no
    /// answer over UDP after this long moves the datagrams to the control connection.
    public var answerWithin: TimeAmount = .seconds(1)
    /// On UDP, after a datagram arrived (or a message was sent), this much silence from the
    /// relay's UDP side starts a probe round: the stream stopped, or UDP did.
    public var quietBeforeProbe: TimeAmount = .milliseconds(500)
    /// On the control connection, UDP is probed (one sealed HELLO over UDP) this long after the
    /// switch, then after twice as long each time, up to `maximumProbeInterval`.
    public var firstProbeInterval: TimeAmount = .seconds(1)
    public var maximumProbeInterval: TimeAmount = .seconds(60)
    /// Back on UDP for this long, the probe interval starts again from `firstProbeInterval`
    /// (a network that keeps losing UDP is probed ever less often: no flapping).
    public var settledAfter: TimeAmount = .seconds(30)

    public init() {}
}

/// The client's choice of datagram path, sans I/O: on UDP it watches for HELLO answers and
/// starts probe rounds when the relay's UDP side falls silent; a round without an answer
/// within `answerWithin` moves the datagrams to the control connection, from where UDP is
/// probed with backoff until an answer arrives over UDP and they move back.
public struct DatagramPathSelector: Sendable {
    public let policy: DatagramPathPolicy
    public private(set) var path: DatagramPath = .udp
    /// UDP path: the running probe round fails at this time unless a HELLO answer came.
    private var answerDue: NIODeadline?
    /// UDP path: a probe round starts at this time, unless something arrives meanwhile.
    private var quietProbeDue: NIODeadline?
    /// Control path: the next UDP probe.
    private var probeDue: NIODeadline?
    private var probeInterval: TimeAmount
    /// When the datagrams last came back to UDP (for `settledAfter`).
    private var returnedAt: NIODeadline?
    /// Moves to the control connection, and back to UDP, since the start.
    public private(set) var switchesToControl = 0
    public private(set) var switchesToUDP = 0

    public init(policy: DatagramPathPolicy) {
        self.policy = policy
        self.probeInterval = policy.firstProbeInterval
    }

    /// What the session must do at a deadline.
    public enum Step: Equatable, Sendable {
        /// On UDP: send a round of HELLO probes (the first one now).
        case startProbeRound
        /// No answer over UDP: the datagrams go over the control connection from now on.
        case switchedToControl
        /// On the control connection: send one HELLO over UDP.
        case probeUDP
    }

    /// When `poll` next has something to do.
    public var nextDeadline: NIODeadline? {
        [answerDue, quietProbeDue, probeDue].compactMap { $0 }.min()
    }

    /// Whether a probe round waits for its answer.
    public var isProbing: Bool { answerDue != nil }

    /// A probe round starts now (at login on UDP, or at a keepalive): it must be answered
    /// within `answerWithin`. What it sends is the caller's (the HELLOs).
    public mutating func probeRoundStarted(now: NIODeadline) {
        guard path == .udp, answerDue == nil else { return }
        answerDue = now + policy.answerWithin
        quietProbeDue = nil
    }

    /// Logged in again on the control path: UDP is probed at once (the network may have changed).
    public mutating func registeredOverControl(now: NIODeadline) {
        probeDue = now
    }

    /// A HELLO answer arrived over `path`; returns true if it brought the datagrams back to UDP.
    public mutating func helloAnswered(over arrival: DatagramPath, now: NIODeadline) -> Bool {
        guard arrival == .udp else { return false }
        answerDue = nil
        quietProbeDue = nil
        guard path == .control else { return false }
        path = .udp
        probeDue = nil
        returnedAt = now
        switchesToUDP += 1
        return true
    }

    /// Another authentic datagram arrived over UDP: more may follow, and silence after them
    /// starts a probe round.
    public mutating func arrivedOverUDP(now: NIODeadline) {
        guard path == .udp, answerDue == nil else { return }
        quietProbeDue = now + policy.quietBeforeProbe
        if let returned = returnedAt, now - returned >= policy.settledAfter {
            probeInterval = policy.firstProbeInterval
            returnedAt = nil
        }
    }

    /// Content went out over UDP: its receipt's copy should come back, or the round starts.
    public mutating func contentSent(now: NIODeadline) {
        guard path == .udp, answerDue == nil, quietProbeDue == nil else { return }
        quietProbeDue = now + policy.quietBeforeProbe
    }

    /// The control connection is lost: nothing is due until the next login (the path is kept).
    public mutating func controlLost() {
        answerDue = nil
        quietProbeDue = nil
        probeDue = nil
    }

    /// What is due at `now`.
    public mutating func poll(now: NIODeadline) -> Step? {
        if let due = answerDue, due <= now {
            answerDue = nil
            path = .control
            switchesToControl += 1
            if returnedAt == nil { probeInterval = policy.firstProbeInterval } // else: it came back and failed again
            returnedAt = nil
            scheduleProbe(now: now)
            return .switchedToControl
        }
        if let due = quietProbeDue, due <= now {
            quietProbeDue = nil
            return .startProbeRound
        }
        if let due = probeDue, due <= now {
            scheduleProbe(now: now)
            return .probeUDP
        }
        return nil
    }

    /// The next UDP probe after the current interval, which doubles (up to the maximum).
    private mutating func scheduleProbe(now: NIODeadline) {
        probeDue = now + probeInterval
        probeInterval = min(probeInterval * 2, policy.maximumProbeInterval)
    }
}
