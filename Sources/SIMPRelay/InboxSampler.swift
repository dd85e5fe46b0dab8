import Logging
import NIOCore
import Prometheus
import SIMPCore
import SIMPRedis

/// The stored messages' count and age (the users' logs, `simp:log:{<id>}` streams,
/// docs/PROTOCOL.md §7.8), sampled from Redis when /metrics is scraped.
///
/// Each scrape advances a sweep of the keyspace (every master of a cluster in turn) by at most
/// `stepsPerScrape` steps, each one
/// `SCAN <cursor> MATCH simp:log:* COUNT <scanCount> TYPE stream` plus one pipeline of `XLEN`
/// and `XRANGE - + COUNT 1` (the oldest entry, whose text starts with its storage time) per log
/// found.
/// The gauges show the last complete sweep: on a keyspace of up to
/// `stepsPerScrape × scanCount` keys (100,000 by default) that is the scrape's own sweep; a
/// larger one takes several scrapes, and `simp_inbox_sampled_timestamp_seconds` says when the
/// figures were complete. The sweep uses a Redis connection of its own, so it neither queues
/// behind nor delays the relay's calls, and does not count in `simp_redis_calls_total`.
///
/// Every relay sharing a Redis reports the same store: aggregate with `max`, not `sum`.
/// Confined to the event loop of the endpoint that owns it.
final class InboxSampler: @unchecked Sendable {
    private let redis: any RedisCommands
    private let eventLoop: EventLoop
    private let stepsPerScrape: Int
    private let scanCount: Int
    private let clock: @Sendable () -> Int64
    private let messages: Gauge
    private let inboxes: Gauge
    private let oldestAge: Gauge
    private let sampledAt: Gauge

    /// What one sweep has found so far.
    private struct Sweep {
        /// The masters being swept (fetched when the sweep starts) and the one being scanned.
        var masters: [any RedisCommands]?
        var node = 0
        var cursor = "0"
        var messages = 0
        var inboxes = 0
        /// Storage time (ms since the epoch) of the oldest entry seen.
        var oldest: Int64?
    }
    private var sweep = Sweep()
    /// The oldest entry of the last complete sweep, to age it at every scrape.
    private var completedOldest: Int64?
    private var completedOnce = false
    /// The scrape in progress, which later scrapes wait for rather than sweeping in parallel.
    private var running: EventLoopFuture<Void>?

    /// - Parameters:
    ///   - redis: the relay's Redis or Redis Cluster; the sampler opens connections of its own to it.
    ///   - clock: wall-clock milliseconds since the epoch.
    init(redis endpoint: RedisEndpoint, registry: PrometheusCollectorRegistry, on eventLoop: EventLoop,
         stepsPerScrape: Int = 20, scanCount: Int = 5000,
         clock: @escaping @Sendable () -> Int64 = { WallClock.millisecondsSinceEpoch() }) {
        self.redis = endpoint.makeClient(eventLoop: eventLoop, logger: Logger(label: "simp.inbox-sampler"))
        self.eventLoop = eventLoop
        self.stepsPerScrape = max(1, stepsPerScrape)
        self.scanCount = max(1, scanCount)
        self.clock = clock
        func describe(_ name: String, _ help: String) -> MetricNameDescriptor {
            MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
        }
        messages = registry.makeGauge(descriptor: describe(
            "simp_inbox_stored_messages", "Entries (stored messages and stored receipts) in all users' logs in Redis; the same for every relay sharing it."))
        inboxes = registry.makeGauge(descriptor: describe(
            "simp_inbox_users", "Users whose log in Redis holds at least one entry."))
        oldestAge = registry.makeGauge(descriptor: describe(
            "simp_inbox_oldest_age_seconds", "Age of the oldest entry in any user's log (0 when all are empty)."))
        sampledAt = registry.makeGauge(descriptor: describe(
            "simp_inbox_sampled_timestamp_seconds", "When the inbox figures were last complete (a full sweep of the keyspace), in seconds since the Unix epoch; 0 before the first."))
    }

    /// Advances the sweep, then brings the gauges up to date. Never fails: if Redis does not
    /// answer, the gauges keep their last complete figures (the sweep resumes next time).
    func sample() -> EventLoopFuture<Void> {
        eventLoop.preconditionInEventLoop()
        if let running { return running }
        let done = step(remaining: stepsPerScrape).map { [self] _ in publish() }
        running = done
        done.whenComplete { [self] _ in running = nil }
        return done
    }

    /// Closes the sampler's Redis connection.
    func shutdown() async {
        await redis.shutdown()
    }

    private func step(remaining: Int) -> EventLoopFuture<Void> {
        guard remaining > 0 else { return eventLoop.makeSucceededVoidFuture() }
        let masters = sweep.masters.map { eventLoop.makeSucceededFuture($0) } ?? redis.masters().hop(to: eventLoop)
        return masters.flatMap { [self] masters -> EventLoopFuture<Void> in
            sweep.masters = masters
            guard sweep.node < masters.count else {
                complete()
                return eventLoop.makeSucceededVoidFuture()
            }
            let page = masters[sweep.node].scanPage(cursor: sweep.cursor, matching: InboxStore.logKeyPrefix + "*", type: "stream", count: scanCount, on: eventLoop)
            return page.flatMap { [self] page in
                heads(of: page.keys).flatMap { [self] in
                    sweep.cursor = page.cursor
                    if page.cursor == "0" { sweep.node += 1 }
                    guard sweep.node == masters.count else { return step(remaining: remaining - 1) }
                    complete()
                    return eventLoop.makeSucceededVoidFuture()
                }
            }
        }.recover { [self] _ in sweep.masters = nil } // asked again next time (a cluster may have failed over)
    }

    /// Adds the length and the oldest entry of each log in `keys` to the sweep.
    private func heads(of keys: [String]) -> EventLoopFuture<Void> {
        guard !keys.isEmpty else { return eventLoop.makeSucceededVoidFuture() }
        let commands = keys.flatMap { [["XLEN", $0], ["XRANGE", $0, "-", "+", "COUNT", "1"]] }
        return redis.pipeline(commands, on: eventLoop).map { [self] replies in
            for index in stride(from: 0, to: replies.count - 1, by: 2) {
                guard let length = replies[index].integer, length > 0 else { continue }
                sweep.messages += Int(length)
                sweep.inboxes += 1
                if let storedAt = Self.firstEntry(replies[index + 1])?.storedAt {
                    sweep.oldest = min(sweep.oldest ?? storedAt, storedAt)
                }
            }
        }
    }

    /// The entry of an `XRANGE … COUNT 1` reply (`[[id, [e, text, k, key]]]`).
    private static func firstEntry(_ reply: RedisValue) -> InboxEntry? {
        guard let fields = reply.array?.first?.array?.last?.array, fields.count >= 2 else { return nil }
        return fields[1].string.flatMap(InboxEntry.init(text:))
    }

    private func complete() {
        messages.set(Double(sweep.messages))
        inboxes.set(Double(sweep.inboxes))
        completedOldest = sweep.oldest
        completedOnce = true
        sampledAt.set(Double(clock()) / 1000)
        sweep = Sweep()
    }

    private func publish() {
        guard completedOnce else { return }
        let age = completedOldest.map { max(0, clock() - $0) } ?? 0
        oldestAge.set(Double(age) / 1000)
    }
}
