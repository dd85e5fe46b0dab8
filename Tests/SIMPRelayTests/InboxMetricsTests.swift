import NIOCore
import NIOPosix
import Prometheus
import SIMPBench
import SIMPCore
import SIMPRedis
@testable import SIMPRelay
import SIMPTestSupport
import XCTest

/// `simp_inbox_*`: the offline store's size and age, sampled from a real Redis at scrape time.
final class InboxMetricsTests: XCTestCase {
    private func entry(from sender: String, to user: String, id: UInt64, storedAt: Int64) -> InboxEntry {
        InboxEntry(message: SIMPMessage(messageId: id, fromUser: sender, toUser: user, content: "stored \(id)"), storedAt: storedAt)
    }

    /// Messages stored through the relay for an offline user, then one old entry, show up in
    /// a real relay's /metrics; delivering the inbox empties it again. Figures are compared
    /// before and after, so other tests' inboxes in a shared Redis do not matter.
    func testStoredMessagesAndTheOldestAgeAppearOnARelaysMetrics() async throws {
        let relay = try await TestRelay.start { $0.metricsPort = 0 }
        do {
            let port = try XCTUnwrap(relay.server.metricsAddress?.port)
            func scrape() async throws -> PrometheusExposition {
                PrometheusExposition(text: try await MetricsScrape.fetch(host: "127.0.0.1", port: port).text)
            }
            let bob = TestRelay.uniqueUser("bob")
            await (try relay.connectClient(user: bob)).close()
            _ = try await Eventually.holds { try await relay.inspector.command(["EXISTS", "simp:user:{\(bob)}"]).integer == 0 }
            let before = try await scrape()
            let messagesBefore = try XCTUnwrap(before.value("simp_inbox_stored_messages"))
            let usersBefore = try XCTUnwrap(before.value("simp_inbox_users"))

            let alice = try await relay.connectClient(user: TestRelay.uniqueUser("alice"))
            for text in ["one", "two", "three"] {
                let result = try await alice.send(text: text, to: bob)
                guard case .stored = result else { return XCTFail("\(result)") }
            }
            let afterStoring = try await scrape()
            XCTAssertEqual(afterStoring.value("simp_inbox_stored_messages"), messagesBefore + 3)
            XCTAssertEqual(afterStoring.value("simp_inbox_users"), usersBefore + 1)

            // An entry stored two hours ago (the store keeps entries younger than --inbox-ttl).
            let twoHoursAgo = WallClock.millisecondsSinceEpoch() - 7_200_000
            let store = InboxStore(redis: relay.inspector, maxMessages: 1000, ttlSeconds: 7 * 24 * 3600)
            let carol = TestRelay.uniqueUser("carol")
            _ = try await store.store(entry(from: "dave", to: carol, id: 1, storedAt: twoHoursAgo), for: carol,
                                      wallNow: twoHoursAgo, on: MultiThreadedEventLoopGroup.singleton.next()).get()
            let withOld = try await scrape()
            XCTAssertEqual(withOld.value("simp_inbox_stored_messages"), messagesBefore + 4)
            XCTAssertEqual(withOld.value("simp_inbox_users"), usersBefore + 2)
            XCTAssertGreaterThanOrEqual(try XCTUnwrap(withOld.value("simp_inbox_oldest_age_seconds")), 7200)
            let sampledAt = try XCTUnwrap(withOld.value("simp_inbox_sampled_timestamp_seconds"))
            XCTAssertEqual(sampledAt, Double(WallClock.millisecondsSinceEpoch()) / 1000, accuracy: 10)

            _ = try await relay.inspector.command(["DEL", InboxStore.logKey(carol), InboxStore.idsKey(carol)])
            let bobClient = try await relay.connectClient(user: bob)
            _ = try await Eventually.holds { try await relay.inspector.pendingEntries(bob).isEmpty }
            let emptied = try await scrape()
            XCTAssertEqual(emptied.value("simp_inbox_stored_messages"), messagesBefore)
            XCTAssertEqual(emptied.value("simp_inbox_users"), usersBefore)
            await bobClient.close()
        } catch {
            await relay.stop()
            throw error
        }
        await relay.stop()
    }

    /// On a keyspace larger than one scrape's share, a sweep resumes over several scrapes and
    /// the figures change only when it is complete, then are exact.
    func testASweepLargerThanOneScrapeCompletesOverSeveralScrapes() async throws {
        let redis = try await RedisServerProcess.startPrivate()
        let client = RedisClient(url: redis.url)
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let now: Int64 = 1_795_255_557_000
        let registry = PrometheusCollectorRegistry()
        let measured = InboxSampler(redis: .single(redis.url), registry: registry, on: loop, stepsPerScrape: 2, scanCount: 3, clock: { now })
        do {
            let store = InboxStore(redis: client, maxMessages: 1000, ttlSeconds: 365 * 24 * 3600)
            for user in 1...7 {
                for id in 1...user {
                    let storedAt = now - Int64(user * 1000 - id) * 1000 // oldest first, as the relay stores
                    _ = try await store.store(entry(from: "s", to: "u\(user)", id: UInt64(id), storedAt: storedAt),
                                              for: "u\(user)", wallNow: now, on: loop).get()
                }
            }
            _ = try await client.pipeline((1...30).map { ["SET", "simp:user:other\($0)", "x"] })
            // 7 logs, 7 dedupe hashes and 30 other keys: at ~3 keys a SCAN and 2 SCANs a scrape,
            // a sweep needs several scrapes.
            var scrapes = 0
            while try scrapeValue(registry, "simp_inbox_sampled_timestamp_seconds") == 0 {
                XCTAssertEqual(try scrapeValue(registry, "simp_inbox_stored_messages"), 0, "no figures before a complete sweep")
                try await loop.flatSubmit { measured.sample() }.get()
                scrapes += 1
                XCTAssertLessThan(scrapes, 100)
            }
            XCTAssertGreaterThan(scrapes, 1)
            XCTAssertEqual(try scrapeValue(registry, "simp_inbox_stored_messages"), 28)
            XCTAssertEqual(try scrapeValue(registry, "simp_inbox_users"), 7)
            XCTAssertEqual(try scrapeValue(registry, "simp_inbox_oldest_age_seconds"), 6999, "u7's first entry")
            XCTAssertEqual(try scrapeValue(registry, "simp_inbox_sampled_timestamp_seconds"), Double(now) / 1000)
        } catch {
            XCTFail("\(error)")
        }
        await measured.shutdown()
        await client.shutdown()
        await redis.stop()
    }

    /// When Redis stops answering, a scrape still completes and the figures stay as they were.
    func testAScrapeWithoutRedisKeepsTheLastFigures() async throws {
        let redis = try await RedisServerProcess.startPrivate()
        let client = RedisClient(url: redis.url)
        let registry = PrometheusCollectorRegistry()
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let sampler = InboxSampler(redis: .single(redis.url), registry: registry, on: loop)
        let now = WallClock.millisecondsSinceEpoch()
        _ = try await InboxStore(redis: client, maxMessages: 10, ttlSeconds: 3600)
            .store(entry(from: "s", to: "u", id: 1, storedAt: now), for: "u", wallNow: now, on: loop).get()
        try await loop.flatSubmit { sampler.sample() }.get()
        let sampledAt = try scrapeValue(registry, "simp_inbox_sampled_timestamp_seconds")
        XCTAssertEqual(try scrapeValue(registry, "simp_inbox_stored_messages"), 1)

        await client.shutdown()
        await redis.stop()
        let started = NIODeadline.now()
        try await loop.flatSubmit { sampler.sample() }.get()
        XCTAssertLessThan(NIODeadline.now() - started, .seconds(3), "one failed call, not one per step")
        XCTAssertEqual(try scrapeValue(registry, "simp_inbox_stored_messages"), 1)
        XCTAssertEqual(try scrapeValue(registry, "simp_inbox_sampled_timestamp_seconds"), sampledAt)
        await sampler.shutdown()
    }

    private func scrapeValue(_ registry: PrometheusCollectorRegistry, _ name: String) throws -> Double {
        try XCTUnwrap(PrometheusExposition(text: registry.emitToString()).value(name), name)
    }
}
