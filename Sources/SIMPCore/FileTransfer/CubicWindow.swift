import Foundation
import NIOCore

/// The congestion window of a file transfer, in chunks: a CUBIC-like controller (RFC 9438),
/// driven only by the calls below, with the time passed in.
///
/// - **Slow start**: the window grows by one chunk per chunk acknowledged (doubling each round
///   trip) until the first loss or `slowStartThreshold`.
/// - **Loss**: with `LossResponse.everyLoss` (TCP's rule) every loss event, and with
///   `.congestionOnly` (the default, a file transfer's) only a loss that congestion explains (see
///   below), shrinks the window to `beta` (0.7) of itself, remembers the size it had (`wMax`;
///   with fast convergence, less when it had not regained the last one), and enters
///   **recovery**: further losses of chunks sent before the reduction are the same congestion
///   event and do not shrink it again. Recovery ends when a chunk sent after the reduction is
///   acknowledged.
/// - **Congestion avoidance**: the window follows `wMax + C·(t − K)³` (C = 0.4, t the seconds
///   since the reduction plus one round trip, K the time to climb back to `wMax`): fast while far
///   below `wMax`, flat near it, probing faster beyond; never slower than Reno would grow.
/// - **Persistent congestion** (a retransmission timeout: nothing acknowledged for an RTO): the
///   window falls to its minimum and slow start begins again, up to half the old window.
/// - **Delay** (`roundTripMeasured`): slow start also ends, before any loss, when the smallest
///   round trip of a round grows by an eighth of the last round's (4 to 16 ms), as in HyStart++
///   (RFC 9406): a queue is building, and doubling once more would overflow it. In avoidance, a
///   round whose smallest round trip is more than twice the smallest ever seen plus 5 ms holds
///   a standing queue: the window shrinks by `delayBeta` (once per round, no retransmission),
///   so a deep buffer (a socket's, a slow receiver's) is not filled until it drops a window.
/// - **Random loss** (`.congestionOnly`): a loss while no queue stands (the smallest of the
///   last 32 round trips within a quarter, at least 5 ms, of the path's minimum, and the
///   smallest of the last 10 within a half; fewer measured says nothing yet) is the link's, not congestion's: the chunk is sent again and
///   the window stays. A loss with a standing queue, or when a quarter of a round's chunks (at
///   least 8) were lost, is congestion. Slow start, too, ends on a standing queue rather than
///   on HyStart's round-to-round rise, which a jittery path trips at random, and then shrinks
///   the window by the path's minimum round trip over the queued one (at most by half), so the
///   queue slow start built drains instead of standing. A lossy link (radio, KCP's test link) then
///   costs retransmissions, not throughput, while an overflowing queue still shrinks the window.
public struct CubicWindow: Equatable, Sendable {
    /// Where the controller is.
    public enum State: Equatable, Sendable {
        case slowStart
        case congestionAvoidance
        /// After a reduction, until a chunk sent after it (a transmission number above the one
        /// recorded) is acknowledged.
        case recovery(until: UInt64)
    }

    /// The multiplicative decrease.
    public static let beta = 0.7
    /// CUBIC's scaling constant (chunks per second cubed).
    public static let c = 0.4
    /// The decrease when a round shows a standing queue (gentler than a loss's).
    public static let delayBeta = 0.85
    /// Round trips measured per round before slow start compares it with the last.
    static let samplesPerRound = 8

    /// Which losses shrink the window.
    public enum LossResponse: Equatable, Sendable {
        /// Every loss event (one per round trip), as TCP does.
        case everyLoss
        /// Only a loss that comes with a queue (or a heavy one): random loss is resent without shrinking.
        case congestionOnly
    }

    /// Which losses shrink the window.
    public let lossResponse: LossResponse
    /// Whether a round showing a standing queue shrinks the window in congestion avoidance.
    public let reducesOnDelay: Bool
    /// Losses that left the window as it was (taken for the link's, not a queue's).
    public private(set) var lossesTolerated = 0

    /// The window: how many chunks may be in flight.
    public private(set) var window: Double
    /// Slow start ends when the window reaches this.
    public private(set) var slowStartThreshold: Double = .infinity
    public private(set) var state: State = .slowStart
    /// The window before the last reduction.
    public private(set) var wMax: Double = 0
    /// The smallest window (also after a timeout).
    public let minimumWindow: Double
    /// The largest window.
    public let maximumWindow: Double
    /// The largest the window has been (a transfer's "one window" when counting what it sent twice).
    public private(set) var largestWindow: Double
    /// The smallest round trip measured so far (the path without a queue).
    public private(set) var minimumRTT: TimeAmount?
    /// Reductions because a round's round trips showed a standing queue.
    public private(set) var delayReductions = 0
    private var round = Round()
    /// The last `recentSamples` round trips, oldest first: their smallest says whether a queue stands now.
    private var recentRTTs: [TimeAmount] = []
    static let recentSamples = 32
    private var epoch: Epoch?
    /// Losses of transmissions numbered up to this are of an event already reacted to.
    private var lossesHandledThrough: UInt64 = 0

    /// One round trip of measurements: it ends when a transmission sent after it began
    /// (numbered above `end`) is acknowledged.
    private struct Round: Equatable, Sendable {
        var end: UInt64 = 0
        var samples = 0
        var minimum: TimeAmount?
        var lastMinimum: TimeAmount?
        var reduced = false
        var acknowledged = 0
        var losses = 0
    }

    private struct Epoch: Equatable, Sendable {
        var start: NIODeadline
        var k: Double
        var origin: Double
        var renoWindow: Double
    }

    /// A controller starting in slow start with `initialWindow` chunks.
    /// `lossResponse` and `reducesOnDelay` choose the file transfer's rules (the defaults) or TCP's
    /// (`.everyLoss`, `false`: what the lab's TCP model runs).
    public init(
        initialWindow: Double = 10, minimumWindow: Double = 2, maximumWindow: Double = 20_000, lossResponse: LossResponse = .congestionOnly,
        reducesOnDelay: Bool = true
    ) {
        self.lossResponse = lossResponse
        self.reducesOnDelay = reducesOnDelay
        self.window = initialWindow
        self.largestWindow = initialWindow
        self.minimumWindow = minimumWindow
        self.maximumWindow = maximumWindow
    }

    /// How many whole chunks may be in flight.
    public var chunks: Int { Int(window) }

    /// `count` chunks were acknowledged; `newest` is the highest transmission number the
    /// acknowledgement covers, `rtt` the smoothed round trip.
    public mutating func acknowledged(count: Int, newest: UInt64, rtt: TimeAmount, now: NIODeadline) {
        guard count > 0 else { return }
        round.acknowledged += count
        if case .recovery(let until) = state {
            guard newest > until else { return } // no growth while recovering
            state = .congestionAvoidance
        }
        switch state {
        case .slowStart:
            window = min(window + Double(count), maximumWindow)
            if window >= slowStartThreshold { state = .congestionAvoidance }
        case .congestionAvoidance:
            avoid(count: count, rtt: rtt, now: now)
        case .recovery:
            break
        }
        largestWindow = max(largestWindow, window)
    }

    /// A round trip `sample` was measured when transmission `newest` was acknowledged;
    /// `newestSent` is the highest number sent so far. Ends slow start, or shrinks the window in
    /// avoidance, when the round trips show a queue building (see the type's description).
    public mutating func roundTripMeasured(_ sample: TimeAmount, newest: UInt64, newestSent: UInt64, now: NIODeadline) {
        minimumRTT = min(minimumRTT ?? sample, sample)
        if recentRTTs.count == Self.recentSamples { recentRTTs.removeFirst() }
        recentRTTs.append(sample)
        if newest > round.end {
            round = Round(end: newestSent, lastMinimum: round.minimum ?? round.lastMinimum)
        }
        round.samples += 1
        round.minimum = min(round.minimum ?? sample, sample)
        guard round.samples >= Self.samplesPerRound, let current = round.minimum else { return }
        switch state {
        case .slowStart:
            guard window >= 16, let last = round.lastMinimum else { return }
            let threshold = min(max(last.nanoseconds / 8, 4_000_000), 16_000_000)
            // A jittery path moves a round's smallest round trip by more than HyStart's
            // threshold: the file transfer's rules wait for a queue that stands.
            let rising = lossResponse == .congestionOnly ? queueStands : current.nanoseconds >= last.nanoseconds + threshold
            if rising {
                if lossResponse == .congestionOnly, let base = minimumRTT {
                    // Drain the queue slow start built: the window the path held without it.
                    let queued = max(current, recentRTTs.suffix(10).min() ?? current)
                    window = max(window * max(Double(base.nanoseconds) / Double(queued.nanoseconds), 0.5), minimumWindow)
                }
                slowStartThreshold = window
                state = .congestionAvoidance
                epoch = nil
            }
        case .congestionAvoidance:
            guard reducesOnDelay, !round.reduced, let base = minimumRTT else { return }
            // TCP-like rules allow a queue of a round trip; the file transfer's, a quarter of one.
            guard lossResponse == .congestionOnly ? queueStands : current.nanoseconds > 2 * base.nanoseconds + 5_000_000 else { return }
            round.reduced = true
            delayReductions += 1
            wMax = window
            window = max(window * Self.delayBeta, minimumWindow)
            slowStartThreshold = window
            epoch = nil
        case .recovery:
            break
        }
    }

    /// Transmission `number` was lost; `newestSent` is the highest transmission number sent so
    /// far. A loss of a transmission sent before the last reduction is ignored.
    public mutating func lost(number: UInt64, newestSent: UInt64, now: NIODeadline) {
        round.losses += 1
        guard number > lossesHandledThrough else { return }
        if lossResponse == .congestionOnly, !congestionExplains() {
            lossesTolerated += 1
            return
        }
        wMax = window < wMax ? window * (1 + Self.beta) / 2 : window // fast convergence
        window = max(window * Self.beta, minimumWindow)
        slowStartThreshold = window
        state = .recovery(until: newestSent)
        lossesHandledThrough = newestSent
        epoch = nil
    }

    /// Whether a loss now is congestion's: a queue shows in the round trips, a heavy share of
    /// this round was lost, or nothing is known of the path yet.
    private func congestionExplains() -> Bool {
        if round.losses >= 8, round.losses * 4 >= round.acknowledged + round.losses { return true }
        return queueStands
    }

    /// Whether the smallest of the last `recentSamples` round trips is more than a quarter (at
    /// least 5 ms) above the path's minimum: a queue stands in front of the path.
    /// Or, sooner, whether the smallest of the last 10 is more than half (at least 5 ms) above it.
    private var queueStands: Bool {
        guard let base = minimumRTT, recentRTTs.count >= 10 else { return false }
        if let latest = recentRTTs.suffix(10).min(), latest.nanoseconds > base.nanoseconds + max(base.nanoseconds / 2, 5_000_000) {
            return true
        }
        guard recentRTTs.count == Self.recentSamples, let recent = recentRTTs.min() else { return false }
        return recent.nanoseconds > base.nanoseconds + max(base.nanoseconds / 4, 5_000_000)
    }

    /// Nothing was acknowledged for a retransmission timeout: everything in flight is taken as
    /// lost. The window falls to its minimum and slow start begins again.
    public mutating func persistentCongestion(newestSent: UInt64) {
        if lossesHandledThrough < newestSent {
            wMax = window
            slowStartThreshold = max(window * Self.beta, minimumWindow)
        }
        window = minimumWindow
        state = .slowStart
        lossesHandledThrough = newestSent
        epoch = nil
    }

    /// The time between two chunks so that a window goes out evenly over `rtt`: faster in slow
    /// start (×2) than after it (×1.25), so pacing never holds the window back.
    public func pacingInterval(rtt: TimeAmount) -> TimeAmount {
        let gain = state == .slowStart ? 2.0 : 1.25
        return .nanoseconds(Int64(Double(rtt.nanoseconds) / (window * gain)))
    }

    private mutating func avoid(count: Int, rtt: TimeAmount, now: NIODeadline) {
        if epoch == nil {
            let origin = max(wMax, window)
            let k = origin > window ? cbrt((origin - window) / Self.c) : 0
            epoch = Epoch(start: now, k: k, origin: origin, renoWindow: window)
        }
        guard var epoch else { return }
        let t = Double((now - epoch.start + rtt).nanoseconds) / 1e9
        let target = epoch.origin + Self.c * (t - epoch.k) * (t - epoch.k) * (t - epoch.k)
        // Reno's growth with CUBIC's beta (RFC 9438 §4.3): the window never grows slower.
        epoch.renoWindow += Double(count) * 3 * (1 - Self.beta) / (1 + Self.beta) / window
        self.epoch = epoch
        var next = window
        if target > window { next += min(target - window, window / 2) / window * Double(count) }
        window = min(max(next, epoch.renoWindow), maximumWindow)
    }
}
