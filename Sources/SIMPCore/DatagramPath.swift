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
    /// Heavy loss: on UDP, when `heavyLossCount` of the last `lossWindow` content messages
    /// whose fate is known needed more than one transmission (a sender's receipted messages, a
    /// receiver's arrivals), the client checks its own UDP: a loss check of `lossCheckProbes`
    /// HELLOs, `lossCheckInterval` apart. Fewer than `lossCheckAnswersToStay` answers over UDP
    /// within `answerWithin` of the first one move the datagrams to the control connection.
    /// Retransmissions alone do not say whose UDP lost the datagrams (the other side's, or a
    /// burst that is over, or none: a late receipt): the HELLOs cross only this client's link,
    /// now. nil: only when UDP stops answering. The count starts afresh at every check and
    /// every return to UDP, so each check needs `lossWindow` new outcomes.
    public var lossWindow = 20
    public var heavyLossCount: Int? = 14
    public var lossCheckProbes = 5
    public var lossCheckAnswersToStay = 2
    public var lossCheckInterval: TimeAmount = .milliseconds(100)
    /// On the control connection, this many UDP probes answered in a row bring the datagrams
    /// back; after an answered probe the next goes `confirmInterval` later (a network that
    /// answers only some probes, heavy loss, stays on the control connection: no flapping).
    public var answersToReturn = 3
    public var confirmInterval: TimeAmount = .milliseconds(250)

    public init() {}
}

/// The client's choice of datagram path, sans I/O: on UDP it watches for HELLO answers and
/// starts probe rounds when the relay's UDP side falls silent; a round without an answer
/// within `answerWithin` moves the datagrams to the control connection, and so does heavy loss
/// (`heavyLossCount` of the latest `lossWindow` messages retransmitted, then a loss check whose
/// HELLOs mostly go unanswered); from there UDP is probed with backoff until `answersToReturn`
/// probes in a row are answered over UDP and they move back.
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
    /// UDP path: the fates of the latest content messages (lost: more than one transmission).
    private var outcomes = LossWindow()
    /// UDP path: the loss check that heavy loss started, if one runs.
    private var lossCheck: LossCheck?
    /// Control path: UDP probes answered in a row, and whether the latest one awaits its answer.
    private var answersInRow = 0
    private var probeAwaitsAnswer = false
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
        /// On UDP, a loss check: send one HELLO (over UDP).
        case lossCheckProbe
    }

    /// When `poll` next has something to do.
    public var nextDeadline: NIODeadline? {
        [answerDue, quietProbeDue, probeDue, lossCheck?.nextProbe, lossCheck?.decideAt].compactMap { $0 }.min()
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
        if var check = lossCheck { // enough answers: this client's UDP works, it stays
            check.answers += 1
            lossCheck = check.answers >= policy.lossCheckAnswersToStay ? nil : check
        }
        guard path == .control else { return false }
        probeAwaitsAnswer = false
        answersInRow += 1
        guard answersInRow >= policy.answersToReturn else {
            probeDue = now + policy.confirmInterval
            return false
        }
        answersInRow = 0
        path = .udp
        probeDue = nil
        returnedAt = now
        outcomes = LossWindow()
        switchesToUDP += 1
        return true
    }

    /// On UDP, a content message's fate became known: `lost` if it needed more than one
    /// transmission (a sender's message receipted after a retransmission, a receiver's arrival
    /// that is a retransmission). Heavy loss starts a loss check at the next `poll`.
    public mutating func contentOutcome(lost: Bool, now: NIODeadline) {
        guard path == .udp, let limit = policy.heavyLossCount, lossCheck == nil else { return }
        outcomes.record(lost, window: policy.lossWindow)
        guard outcomes.count >= policy.lossWindow, outcomes.losses >= limit else { return }
        outcomes = LossWindow()
        lossCheck = LossCheck(nextProbe: now, probesLeft: policy.lossCheckProbes, decideAt: now + policy.answerWithin)
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
        lossCheck = nil
    }

    /// What is due at `now`.
    public mutating func poll(now: NIODeadline) -> Step? {
        let lossConfirmed = lossCheck.map { $0.decideAt <= now } == true
        if answerDue.map({ $0 <= now }) == true || lossConfirmed {
            switchToControl(now: now)
            return .switchedToControl
        }
        if let due = lossCheck?.nextProbe, due <= now {
            lossCheck!.probesLeft -= 1
            lossCheck!.nextProbe = lossCheck!.probesLeft > 0 ? now + policy.lossCheckInterval : nil
            return .lossCheckProbe
        }
        if let due = quietProbeDue, due <= now {
            quietProbeDue = nil
            return .startProbeRound
        }
        if let due = probeDue, due <= now {
            if probeAwaitsAnswer, answersInRow > 0 { // a confirming probe went unanswered: back to the backoff
                (answersInRow, probeAwaitsAnswer) = (0, false)
                scheduleProbe(now: now)
                return nil
            }
            probeAwaitsAnswer = true
            if answersInRow > 0 {
                probeDue = now + policy.confirmInterval
            } else {
                scheduleProbe(now: now)
            }
            return .probeUDP
        }
        return nil
    }

    /// No answer over UDP, or heavy loss confirmed: the datagrams go over the control connection.
    private mutating func switchToControl(now: NIODeadline) {
        answerDue = nil
        lossCheck = nil
        quietProbeDue = nil
        outcomes = LossWindow()
        (answersInRow, probeAwaitsAnswer) = (0, false)
        path = .control
        switchesToControl += 1
        if returnedAt == nil { probeInterval = policy.firstProbeInterval } // else: it came back and failed again
        returnedAt = nil
        scheduleProbe(now: now)
    }

    /// The next UDP probe after the current interval, which doubles (up to the maximum).
    private mutating func scheduleProbe(now: NIODeadline) {
        probeDue = now + probeInterval
        probeInterval = min(probeInterval * 2, policy.maximumProbeInterval)
    }
}

/// A loss check (heavy loss seen on UDP): HELLOs over UDP, and the answers they got.
private struct LossCheck: Sendable {
    /// The next HELLO, nil after the last.
    var nextProbe: NIODeadline?
    var probesLeft: Int
    /// Too few answers by then: UDP loses most datagrams here, the datagrams move.
    var decideAt: NIODeadline
    var answers = 0
}

/// The fates of the latest content messages, up to 64: how many there are and how many were lost.
struct LossWindow: Sendable {
    /// Bit i: the fate of the i-th latest message (1: lost).
    private var bits: UInt64 = 0
    private(set) var count = 0

    /// Lost messages among the latest `count`.
    var losses: Int { bits.nonzeroBitCount }

    /// Adds the newest fate, keeping the latest `window` (at most 64).
    mutating func record(_ lost: Bool, window: Int) {
        let window = min(max(window, 1), 64)
        bits = (bits << 1) | (lost ? 1 : 0)
        if window < 64 { bits &= (UInt64(1) << window) - 1 }
        count = min(count + 1, window)
    }
}
