import Metrics
import SIMPCore

/// The relay's counters, created once so the datagram path never builds a metric.
/// Names are documented in docs/PROTOCOL.md (Operations section).
struct RelayMetrics {
    let datagramsReceived = Counter(label: "simp_datagrams_received_total")
    let datagramsForwarded = Counter(label: "simp_datagrams_forwarded_total")
    let controlFramesReceived = Counter(label: "simp_control_frames_received_total")
    let receiptsRouted = Counter(label: "simp_receipts_routed_total")
    let redisErrors = Counter(label: "simp_redis_errors_total")
    let sessions = Gauge(label: "simp_sessions")
    private let rejected: [RejectReason: Counter] = Dictionary(
        uniqueKeysWithValues: RejectReason.allCases.map {
            ($0, Counter(label: "simp_rejected_total", dimensions: [("reason", $0.rawValue)]))
        })

    func rejected(_ reason: RejectReason) { rejected[reason]!.increment() }
}
