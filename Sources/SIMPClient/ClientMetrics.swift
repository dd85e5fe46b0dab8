import Metrics
import NIOCore
import SIMPCore

/// The client's reliability figures through swift-metrics, as the relay exports its own, on
/// `ClientConfiguration.metricsFactory` (by default the global `MetricsSystem.factory`, so a
/// program that bootstraps a backend such as Prometheus sees them). Names:
/// `simp_client_messages_total{outcome}`, `simp_client_retransmits_total`,
/// `simp_client_spurious_retransmits_total`, `simp_client_duplicates_suppressed_total`,
/// `simp_client_receipt_latency_seconds` (send → receipt), `simp_client_srtt_seconds`,
/// `simp_client_rto_seconds`.
struct ClientMetrics {
    private let delivered: Counter
    private let failed: Counter
    private let retransmits: Counter
    private let spurious: Counter
    private let suppressed: Counter
    private let receiptLatency: Metrics.Timer
    private let smoothedRTT: Gauge
    private let rto: Gauge
    /// The cumulative counts already reported, so each update adds only what is new.
    private var reported = (retransmits: 0, spurious: 0, suppressed: 0)

    init(factory: MetricsFactory) {
        delivered = Counter(label: "simp_client_messages_total", dimensions: [("outcome", "delivered")], factory: factory)
        failed = Counter(label: "simp_client_messages_total", dimensions: [("outcome", "failed")], factory: factory)
        retransmits = Counter(label: "simp_client_retransmits_total", factory: factory)
        spurious = Counter(label: "simp_client_spurious_retransmits_total", factory: factory)
        suppressed = Counter(label: "simp_client_duplicates_suppressed_total", factory: factory)
        receiptLatency = Metrics.Timer(label: "simp_client_receipt_latency_seconds", factory: factory)
        smoothedRTT = Gauge(label: "simp_client_srtt_seconds", factory: factory)
        rto = Gauge(label: "simp_client_rto_seconds", factory: factory)
    }

    /// Reports the outcomes of one step and the session's counters since the last update.
    mutating func update(outcomes: [SenderEvent], session: ClientSession) {
        for outcome in outcomes {
            switch outcome {
            case .delivered(_, _, let latency, _):
                delivered.increment()
                receiptLatency.recordNanoseconds(latency.nanoseconds)
            case .failed:
                failed.increment()
            }
        }
        let sender = session.sender
        retransmits.increment(by: sender.retransmits - reported.retransmits)
        spurious.increment(by: sender.spuriousRetransmits - reported.spurious)
        suppressed.increment(by: session.receiver.suppressed - reported.suppressed)
        reported = (sender.retransmits, sender.spuriousRetransmits, session.receiver.suppressed)
        if let srtt = sender.estimator.smoothedRTT { smoothedRTT.record(Double(srtt.nanoseconds) / 1e9) }
        rto.record(Double(sender.estimator.rto.nanoseconds) / 1e9)
    }
}
