import NIOCore
import SIMPCore
import SIMPTestSupport
import XCTest

@testable import SIMPBench

/// The load generator's multi-relay mode: every message crosses from one relay to another.
final class MultiRelayLoadTests: XCTestCase {
    func testEveryMessageCrossesRelaysAndIsDeliveredOnceAndReceipted() async throws {
        // The bench's users have no passwords: development-mode relays.
        let cluster = try await TestRelayCluster.start(relays: 2) { _, configuration in configuration.requireLogin = false }
        var parameters = LoadGenerator.Parameters()
        parameters.port = cluster.relays[0].port
        parameters.extraPorts = [cluster.relays[1].port]
        parameters.pairs = 4
        parameters.batchesReceipts = false // one receipt frame per message, so one hop each (a burst may hold two)
        let generator = LoadGenerator(parameters: parameters)
        do {
            try await generator.connect()
            let result = try await generator.measure(rate: 300, duration: .milliseconds(500), warmup: .milliseconds(100))
            await generator.close()
            XCTAssertGreaterThan(result.offered, 100)
            XCTAssertEqual(result.failed, 0)
            XCTAssertEqual(result.unresolved, 0)
            XCTAssertEqual(result.duplicates, 0)
            XCTAssertEqual(result.receiptRTT.count, UInt64(result.offered), "every message offered was receipted")
            var published = 0, forwarded = 0, unroutable = 0
            for relay in cluster.relays {
                let stats = try await relay.server.statistics()
                published += stats.deliveriesPublished
                forwarded += stats.datagramsForwarded
                unroutable += stats.rejected[.receiptUnroutable] ?? 0
            }
            XCTAssertEqual(published, 2 * forwarded, "each datagram and each receipt took the hop through Redis")
            XCTAssertEqual(
                unroutable, 0, "a receipt datagram's copy for a sender on another relay is dropped uncounted: its control copy went on (§6.1)")
        } catch {
            await generator.close()
            await cluster.stop()
            throw error
        }
        await cluster.stop()
    }
}
