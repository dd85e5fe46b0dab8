import MetricsTestKit
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// The client library's retransmit and RTT figures reach swift-metrics.
final class ClientMetricsTests: RelayTestCase {
    func testRetransmitsDeliveriesAndReceiptLatencyAreExported() async throws {
        let metrics = TestMetrics()
        let bob = TestRelay.uniqueUser("bob")
        _ = try await relay.connectClient(user: bob)
        let proxy = try await DatagramProxy.start(target: relay.server.datagramAddress!) { _, index in index == 1 ? 0 : 1 }
        defer { Task { await proxy.stop() } }
        let alice = try await relay.connectClient(user: TestRelay.uniqueUser("alice")) {
            $0.datagramTarget = proxy.address
            $0.metricsFactory = metrics
        }

        let result = try await alice.send(text: "counted", to: bob)

        guard case .delivered = result else { return XCTFail("\(result)") }
        XCTAssertEqual(try metrics.expectCounter("simp_client_retransmits_total").totalValue, 1)
        XCTAssertEqual(try metrics.expectCounter("simp_client_messages_total", [("outcome", "delivered")]).totalValue, 1)
        XCTAssertEqual(try metrics.expectTimer("simp_client_receipt_latency_seconds").values.count, 1)
        XCTAssertNotNil(try metrics.expectGauge("simp_client_srtt_seconds").lastValue)
    }
}
