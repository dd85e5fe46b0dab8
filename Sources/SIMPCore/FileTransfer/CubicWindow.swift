import Foundation
import NIOCore

/// The congestion window of a file transfer, in chunks: a CUBIC-like controller (RFC 9438),
/// driven only by the calls below, with the time passed in.
///
/// - **Slow start**: the window grows by one chunk per chunk acknowledged (doubling each round
///   trip) with `.everyLoss` (TCP's), by half a chunk (half again each round trip) with
///   `.congestionOnly`, until the first loss, `slowStartThreshold`, or a queue (below).
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
/// - **Delay** (`roundTripMeasured`): with `.everyLoss`, slow start also ends when the smallest
///   round trip of a round grows by an eighth of the last round's (4 to 16 ms), as in HyStart++
///   (RFC 9406), and a round in avoidance whose smallest round trip is more than twice the
///   path's smallest plus 5 ms shrinks the window by `delayBeta` (once per round, no
///   retransmission). With `.congestionOnly` a queue stands when each of the last 8 round trips
///   is above the path's minimum by an eighth of it (at least 4 ms) plus twice the `jitter`
///   (the mean difference of consecutive round trips, which a slowly growing queue hardly
///   moves): a steady path notices a few ms of queue, a path whose round trips merely spread
///   (KCP's test link, 60–120 ms) does not take its spread for one. Slow start then ends at
///   once, and the window becomes what the path delivered over its round trip without a queue
///   (its minimum plus twice the jitter), but no less than `beta` of itself (what a loss
///   leaves): the queue slow start built drains, and a delivery count still climbing with the
///   window (the queue has only just formed) does not leave the window below the path. The signal comes a round trip late, which is why slow start only grows by half
///   each round trip: the queue built before the sender hears of it stays near half a round
///   trip, instead of the whole round trip (or the buffer) doubling would fill. What was sent
///   before that reaction is one event: its losses and its round trips do not shrink the window
///   again. In avoidance a standing queue shrinks the window by `delayBeta`, once per round
///   and not for round trips of chunks sent before the last reaction.
/// - **Random loss** (`.congestionOnly`): a loss while no queue stands (as above; fewer than
///   10 round trips measured says nothing yet) is the link's, not congestion's: the chunk is
///   sent again and the window stays. A loss with a standing queue, or when a quarter of a
///   round's chunks (at least 8) were lost, is congestion. A lossy link (radio, KCP's test
///   link) then costs retransmissions, not throughput, while an overflowing queue still shrinks
///   the window.
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
    /// The window's growth per chunk acknowledged in slow start under `.congestionOnly`: a
    /// half, so the window grows by half each round trip rather than doubling (see the type's
    /// description).
    public static let gentleSlowStartGrowth = 0.5
    /// Consecutive round trips that must all stand above the path's minimum for a queue to stand.
    static let standingSamples = 8

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
    /// The mean difference between consecutive round trips (smoothed by 1/8): the path's jitter,
    /// which a queue (changing slowly) hardly moves.
    public private(set) var jitter: TimeAmount = .zero
    /// Chunks acknowledged so far, and when: what the path delivered over the last round trip.
    private var delivered = 0
    private var deliveries: [Delivery] = []

    /// `total` chunks had been acknowledged by `at`.
    private struct Delivery: Equatable, Sendable {
        var at: NIODeadline
        var total: Int
    }
    private var epoch: Epoch?
    /// Losses of transmissions numbered up to this are of an event already reacted to.
    private var lossesHandledThrough: UInt64 = 0
    /// Round trips of transmissions numbered up to this were sent before the last reaction to a queue.
    private var queueHandledThrough: UInt64 = 0

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
        noteDelivered(count, now: now)
        if case .recovery(let until) = state {
            guard newest > until else { return } // no growth while recovering
            state = .congestionAvoidance
        }
        switch state {
        case .slowStart:
            let growth = lossResponse == .congestionOnly ? Self.gentleSlowStartGrowth : 1
            window = min(window + Double(count) * growth, maximumWindow)
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
        if let last = recentRTTs.last {
            let difference = abs(sample.nanoseconds - last.nanoseconds)
            jitter = .nanoseconds(jitter.nanoseconds + (difference - jitter.nanoseconds) / 8)
        }
        if recentRTTs.count == Self.recentSamples { recentRTTs.removeFirst() }
        recentRTTs.append(sample)
        if newest > round.end {
            round = Round(end: newestSent, lastMinimum: round.minimum ?? round.lastMinimum)
        }
        round.samples += 1
        round.minimum = min(round.minimum ?? sample, sample)
        if lossResponse == .congestionOnly, state == .slowStart {
            if window >= 16, queueStands { leaveSlowStartDraining(newestSent: newestSent, now: now) }
            return
        }
        guard round.samples >= Self.samplesPerRound, let current = round.minimum else { return }
        switch state {
        case .slowStart:
            guard window >= 16, let last = round.lastMinimum else { return }
            let threshold = min(max(last.nanoseconds / 8, 4_000_000), 16_000_000)
            if current.nanoseconds >= last.nanoseconds + threshold {
                slowStartThreshold = window
                state = .congestionAvoidance
                epoch = nil
            }
        case .congestionAvoidance:
            // Round trips of chunks sent before the last reaction still show the queue it drains.
            guard reducesOnDelay, !round.reduced, newest > queueHandledThrough, let base = minimumRTT else { return }
            // TCP-like rules allow a queue of a round trip; the file transfer's, a quarter of one.
            guard lossResponse == .congestionOnly ? queueStands : current.nanoseconds > 2 * base.nanoseconds + 5_000_000 else { return }
            round.reduced = true
            queueHandledThrough = newestSent
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

    /// Whether each of the last `standingSamples` round trips is above the path's minimum by
    /// more than an eighth of it (at least 4 ms) plus twice the jitter: a queue stands in front
    /// of the path. The jitter's share keeps a path whose round trips merely spread (KCP's test
    /// link: 60–120 ms) from looking queued, while a steady path notices a few ms of queue.
    private var queueStands: Bool {
        guard let base = minimumRTT, recentRTTs.count >= 10, let latest = recentRTTs.suffix(Self.standingSamples).min() else { return false }
        let margin = max(base.nanoseconds / 8, 4_000_000) + 2 * jitter.nanoseconds
        return latest.nanoseconds > base.nanoseconds + margin
    }

    /// Slow start found a queue: the window becomes what the path delivered over a round trip
    /// without a queue (its minimum plus twice the jitter: the bottleneck's rate times the
    /// round trip, once the queue shows the bottleneck is full), so the queue slow start built
    /// drains, and avoidance probes on from there. Never below `beta` of the window (a loss's
    /// decrease): the queue shows a few ms after it formed, so most of the round trip counted
    /// was delivered while the window was still growing towards the path, and that count alone
    /// left the window a fifth below the path (a clean 20 Mbit/s path: 76 chunks of ~100),
    /// where avoidance climbs back by about a chunk per two round trips. What the floor leaves
    /// of the queue, avoidance's own delay rule takes (× `delayBeta` per round while it stands).
    /// What was sent before now is of the same event: its losses and its round trips (which
    /// show the queue being drained) do not shrink the window again.
    private mutating func leaveSlowStartDraining(newestSent: UInt64, now: NIODeadline) {
        if let base = minimumRTT, let path = deliveredWithin(base + jitter * 2, now: now), Double(path) < window {
            window = max(Double(path), window * Self.beta, minimumWindow)
        }
        lossesHandledThrough = max(lossesHandledThrough, newestSent)
        queueHandledThrough = newestSent
        wMax = window
        slowStartThreshold = window
        state = .congestionAvoidance
        epoch = nil
    }

    /// Records `count` chunks acknowledged at `now`, keeping what the last two minimum round trips need.
    private mutating func noteDelivered(_ count: Int, now: NIODeadline) {
        delivered += count
        deliveries.append(Delivery(at: now, total: delivered))
        let keep = 2 * (minimumRTT ?? .seconds(1)).nanoseconds
        if let first = deliveries.first, now - first.at > .nanoseconds(2 * keep) {
            deliveries.removeAll { now - $0.at > .nanoseconds(keep) }
        }
    }

    /// Chunks acknowledged within `span` before `now` (nil: not measured for that long yet).
    private func deliveredWithin(_ span: TimeAmount, now: NIODeadline) -> Int? {
        guard let before = deliveries.last(where: { now - $0.at >= span }) else { return nil }
        return delivered - before.total
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
