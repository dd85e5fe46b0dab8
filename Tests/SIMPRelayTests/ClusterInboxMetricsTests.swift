import NIOCore
import NIOPosix
import Prometheus
import SIMPCore
import SIMPRedis
import SIMPTestSupport
import XCTest

@testable import SIMPRelay

/// `simp_inbox_*` on a Redis Cluster: the sweep scans every master, so inboxes on each count.
final class ClusterInboxMetricsTests: XCTestCase {
    func testTheSweepCountsInboxesOnEveryMaster() async throws {
        let cluster = try await RedisClusterProcess.shared()
        let relays = try await ClusterRelays.start(on: cluster, relays: 0)
        addTeardownBlock { await relays.stop() }
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let registry = PrometheusCollectorRegistry()
        let sampler = InboxSampler(
            redis: .cluster(seeds: cluster.seeds), registry: registry, on: loop, schedule: InboxSamplingSchedule(scanCount: 10))
        addTeardownBlock { await sampler.shutdown() }
        /// Steps until a sweep completes; the messages and inboxes it counted.
        func sweep() async throws -> (messages: Double, inboxes: Double) {
            let before = try value(registry, "simp_inbox_sampled_timestamp_seconds")
            for _ in 0..<1000 {
                try await loop.flatSubmit { sampler.advance() }.get()
                if try value(registry, "simp_inbox_sampled_timestamp_seconds") != before { break }
                try await Task.sleep(nanoseconds: 1_000_000) // the timestamp has ms resolution (a lower bound)
            }
            return (try value(registry, "simp_inbox_stored_messages"), try value(registry, "simp_inbox_users"))
        }
        let baseline = try await sweep()

        let users = try await relays.usersOnDistinctMasters("inboxed", count: 3)
        let store = InboxStore(redis: relays.inspector, maxMessages: 100, ttlSeconds: 3600)
        let now = WallClock.millisecondsSinceEpoch()
        for (index, user) in users.enumerated() {
            for id in 1...(index + 1) {
                let entry = InboxEntry(message: SIMPMessage(messageId: UInt64(id), fromUser: "s", toUser: user, content: "\(id)"), storedAt: now)
                _ = try await store.store(entry, for: user, wallNow: now, on: loop).get()
            }
        }
        let counted = try await sweep()
        XCTAssertEqual(counted.messages - baseline.messages, 6, "1 + 2 + 3 entries on three masters")
        XCTAssertEqual(counted.inboxes - baseline.inboxes, 3)
        _ = try await relays.inspector.pipeline(users.flatMap { [["DEL", InboxStore.logKey($0)], ["DEL", InboxStore.idsKey($0)]] })
    }

    private func value(_ registry: PrometheusCollectorRegistry, _ name: String) throws -> Double {
        try XCTUnwrap(PrometheusExposition(text: registry.emitToString()).value(name), name)
    }
}
