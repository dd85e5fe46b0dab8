import NIOCore
import NIOPosix
import Prometheus
import SIMPBench
import SIMPCore
import SIMPRedis
import SIMPTestSupport
import XCTest

@testable import SIMPRelay

/// `simp_inbox_*`: the offline store's size and age, sampled from a real Redis in the background;
/// a scrape reads them from memory.
final class InboxMetricsTests: XCTestCase {
    private func entry(from sender: String, to user: String, id: UInt64, storedAt: Int64) -> InboxEntry {
        InboxEntry(message: SIMPMessage(messageId: id, fromUser: sender, toUser: user, content: "stored \(id)"), storedAt: storedAt)
    }

    /// A background schedule fast enough for tests: a step every 20 ms, a sweep every 50 ms.
    private static let quickSampling = InboxSamplingSchedule(stepInterval: .milliseconds(20), sweepInterval: .milliseconds(50))

    /// Messages stored through the relay for an offline user, then one old entry, show up in
    /// a real relay's /metrics; delivering the inbox empties it again. Figures are compared
    /// before and after, so other tests' inboxes in a shared Redis do not matter.
    func testStoredMessagesAndTheOldestAgeAppearOnARelaysMetrics() async throws {
        let relay = try await TestRelay.start {
            $0.metricsPort = 0
            $0.inboxSampling = Self.quickSampling
        }
        do {
            let port = try XCTUnwrap(relay.server.metricsAddress?.port)
            func scrape() async throws -> PrometheusExposition {
                PrometheusExposition(text: try await MetricsScrape.fetch(host: "127.0.0.1", port: port).text)
            }
            /// Scrapes until the background sampler has completed a sweep that started after
            /// now: the second sweep to complete from now on.
            func scrapeAfterASweep() async throws -> PrometheusExposition {
                let name = "simp_inbox_sampled_timestamp_seconds"
                var latest = try await scrape()
                var completions = 0, last = latest.value(name)
                _ = try await Eventually.holds {
                    latest = try await scrape()
                    if latest.value(name) != last { completions += 1 }
                    last = latest.value(name)
                    return completions >= 2
                }
                XCTAssertEqual(completions, 2, "the background sampler completes sweeps")
                return latest
            }
            let bob = TestRelay.uniqueUser("bob")
            await (try relay.connectClient(user: bob)).close()
            _ = try await Eventually.holds { try await relay.inspector.command(["EXISTS", "simp:user:{\(bob)}"]).integer == 0 }
            let before = try await scrapeAfterASweep()
            let messagesBefore = try XCTUnwrap(before.value("simp_inbox_stored_messages"))
            let usersBefore = try XCTUnwrap(before.value("simp_inbox_users"))

            let alice = try await relay.connectClient(user: TestRelay.uniqueUser("alice"))
            for text in ["one", "two", "three"] {
                let result = try await alice.send(text: text, to: bob)
                guard case .stored = result else { return XCTFail("\(result)") }
            }
            let afterStoring = try await scrapeAfterASweep()
            XCTAssertEqual(afterStoring.value("simp_inbox_stored_messages"), messagesBefore + 3)
            XCTAssertEqual(afterStoring.value("simp_inbox_users"), usersBefore + 1)

            // An entry stored two hours ago (the store keeps entries younger than --inbox-ttl).
            let twoHoursAgo = WallClock.millisecondsSinceEpoch() - 7_200_000
            let store = InboxStore(redis: relay.inspector, maxMessages: 1000, ttlSeconds: 7 * 24 * 3600)
            let carol = TestRelay.uniqueUser("carol")
            _ = try await store.store(
                entry(from: "dave", to: carol, id: 1, storedAt: twoHoursAgo), for: carol,
                wallNow: twoHoursAgo, on: MultiThreadedEventLoopGroup.singleton.next()
            ).get()
            let withOld = try await scrapeAfterASweep()
            XCTAssertEqual(withOld.value("simp_inbox_stored_messages"), messagesBefore + 4)
            XCTAssertEqual(withOld.value("simp_inbox_users"), usersBefore + 2)
            XCTAssertGreaterThanOrEqual(try XCTUnwrap(withOld.value("simp_inbox_oldest_age_seconds")), 7200)
            let sampledAt = try XCTUnwrap(withOld.value("simp_inbox_sampled_timestamp_seconds"))
            XCTAssertEqual(sampledAt, Double(WallClock.millisecondsSinceEpoch()) / 1000, accuracy: 10)

            _ = try await relay.inspector.command(["DEL", InboxStore.logKey(carol), InboxStore.idsKey(carol)])
            let bobClient = try await relay.connectClient(user: bob)
            _ = try await Eventually.holds { try await relay.inspector.pendingEntries(bob).isEmpty }
            let emptied = try await scrapeAfterASweep()
            XCTAssertEqual(emptied.value("simp_inbox_stored_messages"), messagesBefore)
            XCTAssertEqual(emptied.value("simp_inbox_users"), usersBefore)
            await bobClient.close()
        } catch {
            await relay.stop()
            throw error
        }
        await relay.stop()
    }

    /// On a keyspace larger than one step's SCAN, a sweep resumes over several steps and the
    /// figures change only when it is complete, then are exact.
    func testASweepLargerThanOneStepCompletesOverSeveralSteps() async throws {
        let redis = try await RedisServerProcess.startPrivate()
        let client = RedisClient(url: redis.url)
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let now: Int64 = 1_795_255_557_000
        let registry = PrometheusCollectorRegistry()
        let measured = InboxSampler(
            redis: .single(redis.url), registry: registry, on: loop,
            schedule: InboxSamplingSchedule(scanCount: 3), clock: { now })
        do {
            let store = InboxStore(redis: client, maxMessages: 1000, ttlSeconds: 365 * 24 * 3600)
            for user in 1...7 {
                for id in 1...user {
                    let storedAt = now - Int64(user * 1000 - id) * 1000 // oldest first, as the relay stores
                    _ = try await store.store(
                        entry(from: "s", to: "u\(user)", id: UInt64(id), storedAt: storedAt),
                        for: "u\(user)", wallNow: now, on: loop
                    ).get()
                }
            }
            _ = try await client.pipeline((1...30).map { ["SET", "simp:user:other\($0)", "x"] })
            // 7 logs, 7 dedupe hashes and 30 other keys: at ~3 keys a SCAN, a sweep needs
            // several steps.
            var steps = 0
            while try scrapeValue(registry, "simp_inbox_sampled_timestamp_seconds") == 0 {
                XCTAssertEqual(try scrapeValue(registry, "simp_inbox_stored_messages"), 0, "no figures before a complete sweep")
                try await loop.flatSubmit { measured.advance() }.get()
                steps += 1
                XCTAssertLessThan(steps, 100)
            }
            XCTAssertGreaterThan(steps, 1)
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

    /// When Redis stops answering, a step still completes and the figures stay as they were.
    func testAStepWithoutRedisKeepsTheLastFigures() async throws {
        let redis = try await RedisServerProcess.startPrivate()
        let client = RedisClient(url: redis.url)
        let registry = PrometheusCollectorRegistry()
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let sampler = InboxSampler(redis: .single(redis.url), registry: registry, on: loop)
        let now = WallClock.millisecondsSinceEpoch()
        _ = try await InboxStore(redis: client, maxMessages: 10, ttlSeconds: 3600)
            .store(entry(from: "s", to: "u", id: 1, storedAt: now), for: "u", wallNow: now, on: loop).get()
        try await loop.flatSubmit { sampler.advance() }.get()
        let sampledAt = try scrapeValue(registry, "simp_inbox_sampled_timestamp_seconds")
        XCTAssertEqual(try scrapeValue(registry, "simp_inbox_stored_messages"), 1)

        await client.shutdown()
        await redis.stop()
        let started = NIODeadline.now()
        try await loop.flatSubmit { sampler.advance() }.get()
        XCTAssertLessThan(NIODeadline.now() - started, .seconds(3), "one failed call, not one per step")
        XCTAssertEqual(try scrapeValue(registry, "simp_inbox_stored_messages"), 1)
        XCTAssertEqual(try scrapeValue(registry, "simp_inbox_sampled_timestamp_seconds"), sampledAt)
        await sampler.shutdown()
    }

    /// Scrapes of /metrics send Redis nothing (each used to run up to 20 `SCAN … COUNT 5000`
    /// and a pipeline per page): the figures come from the background sampler, which keeps to
    /// its schedule however often the endpoint is scraped.
    func testScrapesSendRedisNothing() async throws {
        let redis = try await RedisServerProcess.startPrivate()
        let client = RedisClient(url: redis.url)
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let now = WallClock.millisecondsSinceEpoch()
        _ = try await InboxStore(redis: client, maxMessages: 10, ttlSeconds: 3600)
            .store(entry(from: "s", to: "u", id: 1, storedAt: now), for: "u", wallNow: now, on: loop).get()
        let registry = PrometheusCollectorRegistry()
        // One sweep at start, the next an hour later: none during the scrapes.
        let schedule = InboxSamplingSchedule(stepInterval: .milliseconds(10), sweepInterval: .hours(1))
        let channel = try await MetricsEndpoint.bind(
            host: "127.0.0.1", port: 0, registry: registry, redis: .single(redis.url),
            inboxSchedule: schedule, on: loop
        ) {}
        do {
            let port = try XCTUnwrap(channel.localAddress?.port)
            func scrape() async throws -> PrometheusExposition {
                PrometheusExposition(text: try await MetricsScrape.fetch(host: "127.0.0.1", port: port).text)
            }
            let sampled = try await Eventually.holds { try await scrape().value("simp_inbox_stored_messages") == 1 }
            XCTAssertTrue(sampled, "the background sweep fills the figures without a scrape's help")
            let before = try await sampledCommands(client)
            for _ in 0..<20 { _ = try await scrape() }
            let after = try await sampledCommands(client)
            XCTAssertEqual(after, before, "SCAN, XLEN and XRANGE calls during 20 scrapes")
            let last = try await scrape()
            XCTAssertEqual(last.value("simp_inbox_stored_messages"), 1)
        } catch {
            XCTFail("\(error)")
        }
        try? await channel.close()
        await client.shutdown()
        await redis.stop()
    }

    /// Calls of the commands the inbox sampler sends, from `INFO commandstats`.
    private func sampledCommands(_ client: RedisClient) async throws -> [String: Int] {
        let reply = try await client.command(["INFO", "commandstats"])
        let info = try XCTUnwrap(reply.string)
        var calls: [String: Int] = [:]
        for line in info.split(whereSeparator: \.isNewline) {
            for command in ["scan", "xlen", "xrange"] where line.hasPrefix("cmdstat_\(command):calls=") {
                calls[command] = Int(line.dropFirst("cmdstat_\(command):calls=".count).prefix { $0.isNumber })
            }
        }
        return calls
    }

    private func scrapeValue(_ registry: PrometheusCollectorRegistry, _ name: String) throws -> Double {
        try XCTUnwrap(PrometheusExposition(text: registry.emitToString()).value(name), name)
    }
}
