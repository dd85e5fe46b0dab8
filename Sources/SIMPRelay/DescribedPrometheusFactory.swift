import CoreMetrics
import Prometheus

/// A swift-metrics factory on a Prometheus registry that registers each metric with its
/// `# HELP` text.
///
/// swift-prometheus 2.4.1 can emit HELP lines, but only for metrics made on the registry with
/// help text: its `PrometheusMetricsFactory` (the swift-metrics bridge) always passes
/// an empty text. This factory makes the same metrics through the registry's descriptor methods,
/// taking the text from `help` by metric name, and histogram buckets from the wrapped
/// `PrometheusMetricsFactory`'s settings. A name missing from `help` gets no HELP line.
public struct DescribedPrometheusFactory: MetricsFactory {
    /// Bucket settings and the registry.
    public let base: PrometheusMetricsFactory
    /// HELP text by metric name.
    public let help: [String: String]

    public init(_ base: PrometheusMetricsFactory, help: [String: String]) {
        self.base = base
        self.help = help
    }

    private var registry: PrometheusCollectorRegistry { base.registry }

    /// `label` as a whole name (no namespace or unit parts to join) with its help text.
    private func descriptor(_ label: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: label, unitName: "", helpText: help[label] ?? "")
    }

    public func makeCounter(label: String, dimensions: [(String, String)]) -> CounterHandler {
        registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
    }

    public func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> FloatingPointCounterHandler {
        registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
    }

    public func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> RecorderHandler {
        guard aggregate else { return registry.makeGauge(descriptor: descriptor(label), labels: dimensions) }
        let buckets = base.valueHistogramBuckets[label] ?? base.defaultValueHistogramBuckets
        return registry.makeValueHistogram(descriptor: descriptor(label), labels: dimensions, buckets: buckets)
    }

    public func makeMeter(label: String, dimensions: [(String, String)]) -> MeterHandler {
        registry.makeGauge(descriptor: descriptor(label), labels: dimensions)
    }

    public func makeTimer(label: String, dimensions: [(String, String)]) -> TimerHandler {
        let buckets = base.durationHistogramBuckets[label] ?? base.defaultDurationHistogramBuckets
        return registry.makeDurationHistogram(descriptor: descriptor(label), labels: dimensions, buckets: buckets)
    }

    public func destroyCounter(_ handler: CounterHandler) { base.destroyCounter(handler) }
    public func destroyFloatingPointCounter(_ handler: FloatingPointCounterHandler) { base.destroyFloatingPointCounter(handler) }
    public func destroyRecorder(_ handler: RecorderHandler) { base.destroyRecorder(handler) }
    public func destroyMeter(_ handler: MeterHandler) { base.destroyMeter(handler) }
    public func destroyTimer(_ handler: TimerHandler) { base.destroyTimer(handler) }
}
