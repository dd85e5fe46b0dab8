import Foundation
import SIMPTestSupport
import XCTest

@testable import SIMPBench

/// `simp-bench client` pushes its messages through real `SIMPClient`s and a real relay, plain
/// and end to end, and checks that each mode's messages arrived as the mode says (figures are
/// reported, never asserted).
final class ClientCostBenchTests: XCTestCase {
    func testBothModesDeliverEveryMessageAndOnlyTheEndToEndOneEncrypts() async throws {
        // The bench's users have no passwords: a development-mode relay.
        let cluster = try await TestRelayCluster.start(relays: 1) { _, configuration in configuration.requireLogin = false }
        var options = ClientCostBench.Options()
        options.messages = 20
        options.rounds = 1
        options.rate = 200
        options.pattern = .alternating
        do {
            let report = try await ClientCostBench.run(options: options, relay: .init(port: cluster.relays[0].port, pid: nil))
            await cluster.stop()
            XCTAssertEqual(report.rows.map(\.endToEnd), [false, true])
            XCTAssertEqual(report.rows.map(\.messages), [20, 20])
            XCTAssertTrue(report.rows.allSatisfy { $0.aliceMicroseconds > 0 && $0.bobMicroseconds > 0 }, "both client threads worked")
            XCTAssertTrue(report.rows.allSatisfy { $0.relayMicroseconds == nil }, "an in-process relay is not measured")
            let json = try JSONSerialization.jsonObject(with: Data(report.json().utf8)) as? [String: Any]
            XCTAssertEqual((json?["rows"] as? [Any])?.count, 2)
            XCTAssertEqual(json?["pattern"] as? String, "alternating")
            XCTAssertTrue(report.table().contains("end to end ÷ plain"))
        } catch {
            await cluster.stop()
            throw error
        }
    }
}
