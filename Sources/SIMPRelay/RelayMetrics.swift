import CoreMetrics
import Prometheus
import SIMPCore

/// The relay's metrics, created once so the datagram path never builds a metric.
/// Names are documented in docs/OPERATIONS.md §9; `help` holds their `# HELP` texts.
struct RelayMetrics {
    let datagramsReceived: CoreMetrics.Counter
    let datagramsForwarded: CoreMetrics.Counter
    let controlFramesReceived: CoreMetrics.Counter
    let receiptsRouted: CoreMetrics.Counter
    /// Datagrams and receipts handed to other relays through Redis and heard there.
    let deliveriesPublished: CoreMetrics.Counter
    /// Payloads other relays handed to this one.
    let deliveriesReceived: CoreMetrics.Counter
    let redisCalls: CoreMetrics.Counter
    let redisErrors: CoreMetrics.Counter
    let sessions: CoreMetrics.Gauge
    /// Sessions whose datagrams go over UDP, and over their control connection (docs/PROTOCOL.md §5.5).
    let sessionsOverUDP: CoreMetrics.Gauge
    let sessionsOverControl: CoreMetrics.Gauge
    /// Sealed datagrams carried in DATAGRAM control frames, received and sent.
    let datagramsCarriedIn: CoreMetrics.Counter
    let datagramsCarriedOut: CoreMetrics.Counter
    /// Datagrams held in the relay while their recipient's route is looked up in Redis.
    let datagramsAwaitingLookup: CoreMetrics.Gauge
    /// From reading a burst of datagrams to having flushed their forwards, per burst.
    let forwardLatency: CoreMetrics.Timer
    private let rejectedCounters: [RejectReason: CoreMetrics.Counter]

    /// Metrics on `factory` (the global `MetricsSystem.factory` unless the relay exports its own).
    init(factory: MetricsFactory) {
        datagramsReceived = CoreMetrics.Counter(label: "simp_datagrams_received_total", factory: factory)
        datagramsForwarded = CoreMetrics.Counter(label: "simp_datagrams_forwarded_total", factory: factory)
        controlFramesReceived = CoreMetrics.Counter(label: "simp_control_frames_received_total", factory: factory)
        receiptsRouted = CoreMetrics.Counter(label: "simp_receipts_routed_total", factory: factory)
        deliveriesPublished = CoreMetrics.Counter(label: "simp_relay_deliveries_published_total", factory: factory)
        deliveriesReceived = CoreMetrics.Counter(label: "simp_relay_deliveries_received_total", factory: factory)
        redisCalls = CoreMetrics.Counter(label: "simp_redis_calls_total", factory: factory)
        redisErrors = CoreMetrics.Counter(label: "simp_redis_errors_total", factory: factory)
        sessions = CoreMetrics.Gauge(label: "simp_sessions", factory: factory)
        sessionsOverUDP = CoreMetrics.Gauge(label: Self.sessionsByPathLabel, dimensions: [("path", "udp")], factory: factory)
        sessionsOverControl = CoreMetrics.Gauge(label: Self.sessionsByPathLabel, dimensions: [("path", "tcp")], factory: factory)
        datagramsCarriedIn = CoreMetrics.Counter(label: Self.datagramsOverTCPLabel, dimensions: [("direction", "in")], factory: factory)
        datagramsCarriedOut = CoreMetrics.Counter(label: Self.datagramsOverTCPLabel, dimensions: [("direction", "out")], factory: factory)
        datagramsAwaitingLookup = CoreMetrics.Gauge(label: "simp_datagrams_awaiting_lookup", factory: factory)
        forwardLatency = CoreMetrics.Timer(label: Self.forwardLatencyLabel, factory: factory)
        rejectedCounters = Dictionary(
            uniqueKeysWithValues: RejectReason.allCases.map {
                ($0, Counter(label: "simp_rejected_total", dimensions: [("reason", $0.rawValue)], factory: factory))
            })
    }

    func rejected(_ reason: RejectReason) { rejectedCounters[reason]!.increment() }

    static let forwardLatencyLabel = "simp_forward_latency_seconds"
    static let sessionsByPathLabel = "simp_sessions_by_path"
    static let datagramsOverTCPLabel = "simp_datagrams_over_tcp_total"

    /// The `# HELP` text of each metric above, by name.
    static let help: [String: String] = [
        "simp_datagrams_received_total": "UDP datagrams within the size limit received (before decoding).",
        "simp_datagrams_forwarded_total": "Datagrams sent to a recipient.",
        "simp_control_frames_received_total": "Complete control frames received over TCP (before decoding).",
        "simp_receipts_routed_total": "RECEIPT frames forwarded to the original sender's control connection.",
        "simp_relay_deliveries_published_total": "Datagrams and receipts published to another relay's delivery channel and heard there.",
        "simp_relay_deliveries_received_total": "Payloads other relays published on this relay's delivery channel.",
        "simp_redis_calls_total": "Redis round trips made by the relay (a pipeline counts once).",
        "simp_redis_errors_total": "Failed Redis calls (register, unregister, lookup, publish, session checks, refresh rounds).",
        "simp_sessions": "Sessions (logged-in users) held by this relay.",
        "simp_sessions_by_path":
            "Sessions by the way their datagrams go: path=udp, or path=tcp (in DATAGRAM frames on the control connection, UDP being blocked).",
        "simp_datagrams_over_tcp_total":
            "Sealed datagrams carried in DATAGRAM control frames, from clients (direction=in) and to them (direction=out).",
        "simp_datagrams_awaiting_lookup": "Datagrams held while their recipient's route is looked up in Redis.",
        forwardLatencyLabel:
            "Per burst of datagrams read together, from reading the first to having flushed every forward; sampled: at most one burst per millisecond.",
        "simp_rejected_total": "Input dropped or refused, by reason (docs/OPERATIONS.md section 9).",
    ]
}

/// Prometheus export of the relay's metrics.
public enum RelayPrometheus {
    /// A swift-metrics factory on `registry` that gives the relay's metrics their `# HELP`
    /// texts, with microsecond-scale buckets for the forwarding-latency histogram. Bootstrap
    /// `MetricsSystem` with it and pass the same registry as `RelayConfiguration.metricsRegistry`
    /// to serve it at /metrics.
    public static func factory(registry: PrometheusCollectorRegistry) -> DescribedPrometheusFactory {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets[RelayMetrics.forwardLatencyLabel] = [
            .microseconds(10), .microseconds(25), .microseconds(50), .microseconds(100), .microseconds(250),
            .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10),
            .milliseconds(50), .milliseconds(250),
        ]
        return DescribedPrometheusFactory(factory, help: RelayMetrics.help)
    }
}
