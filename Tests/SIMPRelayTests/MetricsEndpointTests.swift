import Logging
import NIOCore
import NIOPosix
import Prometheus
import SIMPBench
import SIMPCore
import SIMPRedis
import SIMPTestSupport
import XCTest

@testable import SIMPRelay

/// `/metrics` of a real relay (its own Prometheus registry, Redis and loopback sockets).
final class MetricsEndpointTests: XCTestCase {
    func testMetricsEndpointExportsCountersThatMove() async throws {
        let relay = try await TestRelay.start { $0.metricsPort = 0 }
        do {
            let port = try XCTUnwrap(relay.server.metricsAddress?.port)
            let before = try await MetricsScrape.fetch(host: "127.0.0.1", port: port)
            XCTAssertEqual(before["simp_datagrams_forwarded_total"], 0)

            let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
            _ = try await relay.connectClient(user: bob)
            let aliceClient = try await relay.connectClient(user: alice)
            let result = try await aliceClient.send(text: "counted", to: bob)
            guard case .delivered = result else { return XCTFail("\(result)") }
            try await RawDatagram.send([0xff, 0xff, 0xff, 0x01], to: relay.server.datagramAddress!)
            _ = try await Eventually.holds { try await relay.server.statistics().rejected[.unsealed] == 1 }

            let after = try await MetricsScrape.fetch(host: "127.0.0.1", port: port)
            XCTAssertEqual(after["simp_datagrams_forwarded_total"], 2, "the message and its receipt datagram")
            XCTAssertGreaterThanOrEqual(after["simp_datagrams_received_total"] ?? 0, 5, "two HELLOs, the message, its receipt, the garbage")
            XCTAssertEqual(after["simp_receipts_routed_total"], 1)
            XCTAssertEqual(after["simp_sessions"], 2)
            XCTAssertEqual(after["simp_rejected_total{reason=\"unsealed\"}"], 1)
            XCTAssertEqual(after["simp_datagrams_awaiting_lookup"], 0)
            XCTAssertEqual(after["simp_redis_errors_total"], 0)
            let redisCalls = after.total("simp_redis_calls_total")
            XCTAssertGreaterThanOrEqual(redisCalls, 2, "two registrations are Redis round trips")
            XCTAssertEqual(redisCalls, Double(relay.server.redisRoundTrips), accuracy: 2)
            XCTAssertGreaterThanOrEqual(after["simp_forward_latency_seconds_count"] ?? 0, 1)
        } catch {
            await relay.stop()
            throw error
        }
        await relay.stop()
    }

    /// Every family has a `# HELP` with text and a `# TYPE`, and every sample belongs to a
    /// family (Prometheus' text format; promtool and Grafana show the HELP text).
    func testEveryMetricHasHelpAndType() async throws {
        let relay = try await TestRelay.start { $0.metricsPort = 0 }
        do {
            let port = try XCTUnwrap(relay.server.metricsAddress?.port)
            let metrics = PrometheusExposition(text: try await MetricsScrape.fetch(host: "127.0.0.1", port: port).text)
            let families = Set(metrics.samples.map { metrics.family(ofSample: $0.name) })
            XCTAssertGreaterThanOrEqual(families.count, 20)
            for family in families.sorted() {
                XCTAssertNotNil(metrics.types[family], "\(family) has no # TYPE")
                XCTAssertFalse((metrics.help[family] ?? "").isEmpty, "\(family) has no # HELP text")
            }
            XCTAssertEqual(Set(metrics.types.keys), families, "no TYPE line without samples")
            XCTAssertEqual(metrics.types["simp_rejected_total"], "counter")
            XCTAssertEqual(metrics.types["simp_forward_latency_seconds"], "histogram")
            XCTAssertEqual(metrics.types["simp_datagrams_awaiting_lookup"], "gauge")
            XCTAssertEqual(metrics.types["process_cpu_seconds_total"], "counter")
            XCTAssertNil(metrics.types["simp_inbox_depth"], "renamed to simp_datagrams_awaiting_lookup")
            XCTAssertEqual(metrics.value("simp_build_info", ["version": SIMPVersion.current]), 1)
        } catch {
            await relay.stop()
            throw error
        }
        await relay.stop()
    }

    /// Without a Redis (a relay on another store) the endpoint serves the rest, no inbox figures.
    func testWithoutRedisTheEndpointHasNoInboxFigures() async throws {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let channel = try await MetricsEndpoint.bind(
            host: "127.0.0.1", port: 0, registry: PrometheusCollectorRegistry(), redis: nil, on: loop
        ) {}
        let port = try XCTUnwrap(channel.localAddress?.port)
        let metrics = PrometheusExposition(text: try await MetricsScrape.fetch(host: "127.0.0.1", port: port).text)
        try await channel.close()
        XCTAssertEqual(metrics.value("simp_build_info", ["version": SIMPVersion.current]), 1)
        XCTAssertNotNil(metrics.value("process_open_fds"))
        XCTAssertFalse(metrics.sampleNames.contains { $0.hasPrefix("simp_inbox_") }, "\(metrics.sampleNames)")
    }

    /// The store names the Redis whose inboxes /metrics reports, through the wrapper of
    /// `--threads N` too (relay 0's endpoint had no inbox figures when the endpoint asked
    /// whether the store was a `RedisRelayStore`); a store that is not Redis names none.
    func testTheStoreNamesTheRedisOfTheInboxFigures() async throws {
        let endpoint = RedisEndpoint.single(RedisURL(host: "127.0.0.1", port: 1))
        let redis = RedisRelayStore(endpoint: endpoint, logger: Logger(label: "test.inbox-redis"))
        XCTAssertEqual(redis.inboxRedis, endpoint)
        XCTAssertEqual(SiblingAwareStore(base: redis, siblings: SiblingRelays()).inboxRedis, endpoint)
        XCTAssertNil(InMemoryRelayStore().inboxRedis)
        await redis.shutdown()
    }

    func testOtherPathsAreNotFound() async throws {
        let relay = try await TestRelay.start { $0.metricsPort = 0 }
        let port = try XCTUnwrap(relay.server.metricsAddress?.port)
        do {
            _ = try await MetricsScrape.fetch(host: "127.0.0.1", port: port, path: "/other")
            XCTFail("/other must not be served")
        } catch {
            XCTAssertTrue("\(error)".contains("404"), "\(error)")
        }
        await relay.stop()
    }
}
