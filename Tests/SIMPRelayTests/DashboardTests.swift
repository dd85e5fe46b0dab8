import Foundation
import SIMPBench
import SIMPTestSupport
import XCTest

/// dist/simp-grafana-dashboard.json queries only metrics (and label values) that a real relay
/// serves on /metrics.
final class DashboardTests: XCTestCase {
    static let dashboardFile = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("dist/simp-grafana-dashboard.json")

    /// Every PromQL text in the dashboard: panel targets, template variable queries, annotations.
    static func queries(in json: Any) -> [String] {
        switch json {
        case let object as [String: Any]:
            return object.flatMap { key, value -> [String] in
                if ["expr", "definition"].contains(key), let text = value as? String { return [text] }
                return queries(in: value)
            }
        case let array as [Any]: return array.flatMap { queries(in: $0) }
        default: return []
        }
    }

    /// `(metric, [label: value])` for each selector in `query`; only `label="value"` matchers
    /// without Grafana variables are kept (regex matchers and `$variables` match anything).
    static func selectors(in query: String) throws -> [(metric: String, labels: [String: String])] {
        let selector = try NSRegularExpression(pattern: #"\b((?:simp|process)_[a-z_]+)(\{[^}]*\})?"#)
        let matcher = try NSRegularExpression(pattern: #"([a-z_]+)\s*=\s*"([^"$]*)""#)
        let text = query as NSString
        return selector.matches(in: query, range: NSRange(location: 0, length: text.length)).map { match in
            let metric = text.substring(with: match.range(at: 1))
            var labels: [String: String] = [:]
            if match.range(at: 2).location != NSNotFound {
                let braces = text.substring(with: match.range(at: 2))
                for pair in matcher.matches(in: braces, range: NSRange(location: 0, length: (braces as NSString).length)) {
                    labels[(braces as NSString).substring(with: pair.range(at: 1))] = (braces as NSString).substring(with: pair.range(at: 2))
                }
            }
            return (metric, labels)
        }
    }

    func testEveryMetricTheDashboardQueriesIsOnARelaysMetrics() async throws {
        let dashboard = try JSONSerialization.jsonObject(with: Data(contentsOf: Self.dashboardFile))
        let queries = Self.queries(in: dashboard)
        XCTAssertGreaterThanOrEqual(queries.count, 30)
        let relay = try await TestRelay.start { $0.metricsPort = 0 }
        do {
            let port = try XCTUnwrap(relay.server.metricsAddress?.port)
            let metrics = PrometheusExposition(text: try await MetricsScrape.fetch(host: "127.0.0.1", port: port).text)
            var checked = Set<String>()
            for query in queries {
                let selectors = try Self.selectors(in: query)
                XCTAssertFalse(selectors.isEmpty, "no SIMP or process metric in \(query)")
                for (metric, labels) in selectors {
                    XCTAssertTrue(metrics.sampleNames.contains(metric), "\(metric) (in \(query)) is not on /metrics")
                    if !labels.isEmpty {
                        XCTAssertNotNil(metrics.value(metric, labels), "no \(metric) series with \(labels)")
                    }
                    checked.insert(metric)
                }
            }
            // The dashboard covers every family the relay exports (histograms by their buckets).
            let families = Set(metrics.samples.map { metrics.family(ofSample: $0.name) })
            let covered = Set(checked.map { metrics.family(ofSample: $0) })
            XCTAssertEqual(families.subtracting(covered), [], "metrics the dashboard does not show")
        } catch {
            await relay.stop()
            throw error
        }
        await relay.stop()
    }

    func testSelectorsAreReadWithTheirFixedLabels() throws {
        let found = try Self.selectors(in: #"sum(rate(simp_rejected_total{instance=~"$instance", reason="bad_mac"}[5m])) / process_open_fds"#)
        XCTAssertEqual(found.map(\.metric), ["simp_rejected_total", "process_open_fds"])
        XCTAssertEqual(found.first?.labels, ["reason": "bad_mac"])
        XCTAssertEqual(found.last?.labels, [:])
    }
}
