import NIOCore

/// Round-trip-time estimator and retransmission timeout, as in RFC 6298.
///
/// SRTT and RTTVAR are smoothed with gains 1/8 and 1/4; RTO = SRTT + max(G, 4·RTTVAR),
/// clamped to [`minimumRTO`, `maximumRTO`]. Before the first sample the RTO is `initialRTO`.
public struct RTTEstimator: Sendable, Equatable {
    public let minimumRTO: TimeAmount
    public let maximumRTO: TimeAmount
    /// Clock granularity G.
    public let granularity: TimeAmount
    public private(set) var smoothedRTT: TimeAmount?
    public private(set) var rttVariance: TimeAmount = .zero
    public private(set) var rto: TimeAmount
    /// Number of samples taken.
    public private(set) var sampleCount = 0

    public init(
        initialRTO: TimeAmount = .seconds(1), minimumRTO: TimeAmount = .milliseconds(200),
        maximumRTO: TimeAmount = .seconds(10), granularity: TimeAmount = .milliseconds(1)
    ) {
        self.minimumRTO = minimumRTO
        self.maximumRTO = maximumRTO
        self.granularity = granularity
        self.rto = Self.clamp(initialRTO, minimumRTO, maximumRTO)
    }

    /// Folds in one unambiguous round-trip measurement.
    public mutating func addSample(_ rtt: TimeAmount) {
        let sample = max(rtt, .zero)
        if let srtt = smoothedRTT {
            let error = TimeAmount.nanoseconds(abs(srtt.nanoseconds - sample.nanoseconds))
            rttVariance = .nanoseconds((3 * rttVariance.nanoseconds + error.nanoseconds) / 4)
            smoothedRTT = .nanoseconds((7 * srtt.nanoseconds + sample.nanoseconds) / 8)
        } else {
            smoothedRTT = sample
            rttVariance = .nanoseconds(sample.nanoseconds / 2)
        }
        sampleCount += 1
        let variance = max(granularity, .nanoseconds(4 * rttVariance.nanoseconds))
        rto = Self.clamp(smoothedRTT! + variance, minimumRTO, maximumRTO)
    }

    /// The timeout for transmission number `attempt` (1-based): RTO doubled per earlier attempt.
    public func timeout(forAttempt attempt: Int, backoff: Double = 2) -> TimeAmount {
        var timeout = Double(rto.nanoseconds)
        for _ in 1..<max(attempt, 1) { timeout *= backoff }
        return .nanoseconds(Int64(min(timeout, Double(maximumRTO.nanoseconds))))
    }

    private static func clamp(_ value: TimeAmount, _ low: TimeAmount, _ high: TimeAmount) -> TimeAmount {
        min(max(value, low), high)
    }
}
