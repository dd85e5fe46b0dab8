import Foundation
import NIOCore

/// The congestion window of a file transfer, in chunks: a CUBIC-like controller (RFC 9438),
/// driven only by the calls below, with the time passed in.
///
/// - **Slow start**: the window grows by one chunk per chunk acknowledged (doubling each round
///   trip) until the first loss or `slowStartThreshold`.
/// - **Loss**: the window shrinks to `beta` (0.7) of itself, remembers the size it had (`wMax`;
///   with fast convergence, less when it had not regained the last one), and enters
///   **recovery**: further losses of chunks sent before the reduction are the same congestion
///   event and do not shrink it again. Recovery ends when a chunk sent after the reduction is
///   acknowledged.
/// - **Congestion avoidance**: the window follows `wMax + C·(t − K)³` (C = 0.4, t the seconds
///   since the reduction plus one round trip, K the time to climb back to `wMax`): fast while far
///   below `wMax`, flat near it, probing faster beyond; never slower than Reno would grow.
/// - **Persistent congestion** (a retransmission timeout: nothing acknowledged for an RTO): the
///   window falls to its minimum and slow start begins again, up to half the old window.
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
    private var epoch: Epoch?
    /// Losses of transmissions numbered up to this are of an event already reacted to.
    private var lossesHandledThrough: UInt64 = 0

    private struct Epoch: Equatable, Sendable {
        var start: NIODeadline
        var k: Double
        var origin: Double
        var renoWindow: Double
    }

    /// A controller starting in slow start with `initialWindow` chunks.
    public init(initialWindow: Double = 10, minimumWindow: Double = 2, maximumWindow: Double = 20_000) {
        self.window = initialWindow
        self.minimumWindow = minimumWindow
        self.maximumWindow = maximumWindow
    }

    /// How many whole chunks may be in flight.
    public var chunks: Int { Int(window) }

    /// `count` chunks were acknowledged; `newest` is the highest transmission number the
    /// acknowledgement covers, `rtt` the smoothed round trip.
    public mutating func acknowledged(count: Int, newest: UInt64, rtt: TimeAmount, now: NIODeadline) {
        guard count > 0 else { return }
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
    }

    /// Transmission `number` was lost; `newestSent` is the highest transmission number sent so
    /// far. A loss of a transmission sent before the last reduction is ignored.
    public mutating func lost(number: UInt64, newestSent: UInt64, now: NIODeadline) {
        guard number > lossesHandledThrough else { return }
        wMax = window < wMax ? window * (1 + Self.beta) / 2 : window // fast convergence
        window = max(window * Self.beta, minimumWindow)
        slowStartThreshold = window
        state = .recovery(until: newestSent)
        lossesHandledThrough = newestSent
        epoch = nil
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
