import Histogram
import NIOCore

/// Latency percentiles in microseconds, as reported by `simp-bench`.
public struct LatencySummary: Codable, Equatable, Sendable {
    public var count: UInt64
    public var p50: UInt64
    public var p95: UInt64
    public var p99: UInt64
    public var p999: UInt64
    public var max: UInt64
}

/// Records latencies into an HdrHistogram (1 µs to 100 s, three significant digits).
public struct LatencyRecorder: Sendable {
    private var histogram = Histogram<UInt64>(highestTrackableValue: 100_000_000, numberOfSignificantValueDigits: .three)

    public init() {}

    /// Records one latency; negative ones count as zero, ones beyond 100 s as 100 s.
    public mutating func record(_ latency: TimeAmount) {
        let micros = UInt64(clamping: Swift.max(0, latency.nanoseconds / 1000))
        _ = histogram.record(Swift.min(micros, histogram.highestTrackableValue))
    }

    /// Adds every sample of `other`.
    public mutating func add(_ other: LatencyRecorder) { histogram.add(other.histogram) }

    public var count: UInt64 { histogram.totalCount }

    /// The percentiles of what was recorded (all zero if nothing was).
    public var summary: LatencySummary {
        guard histogram.totalCount > 0 else { return LatencySummary(count: 0, p50: 0, p95: 0, p99: 0, p999: 0, max: 0) }
        return LatencySummary(
            count: histogram.totalCount,
            p50: histogram.valueAtPercentile(50), p95: histogram.valueAtPercentile(95),
            p99: histogram.valueAtPercentile(99), p999: histogram.valueAtPercentile(99.9),
            max: histogram.max)
    }
}
