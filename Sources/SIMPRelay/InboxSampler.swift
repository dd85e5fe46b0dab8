import Logging
import NIOCore
import Prometheus
import SIMPCore
import SIMPRedis

/// How often a relay's background inbox sampler (`InboxSampler`) looks at Redis, and how much
/// at a time.
public struct InboxSamplingSchedule: Sendable, Equatable {
    /// Time between two steps of a sweep.
    public var stepInterval: TimeAmount
    /// Time between the starts of two sweeps (a sweep still under way is finished first).
    public var sweepInterval: TimeAmount
    /// Keys a step's SCAN looks at.
    public var scanCount: Int

    public init(stepInterval: TimeAmount = .seconds(1), sweepInterval: TimeAmount = .seconds(15), scanCount: Int = 1000) {
        self.stepInterval = stepInterval
        self.sweepInterval = sweepInterval
        self.scanCount = scanCount
    }

    /// The defaults: at most one `SCAN … COUNT 1000` a second, a sweep every 15 s.
    public static let standard = InboxSamplingSchedule()
}

/// The stored messages' count and age (the users' logs, `simp:log:{<id>}` streams,
/// docs/PROTOCOL.md §7.8), sampled from Redis in the background; a /metrics scrape only reads
/// the figures (and ages the oldest entry), so scrapes cost Redis nothing however many
/// scrapers there are.
///
/// Once `start`ed, the sampler takes one step every `InboxSamplingSchedule.stepInterval`
/// while a sweep of the keyspace (every master of a cluster in turn) is under way, and starts a
/// sweep every `sweepInterval` (or, on a keyspace too large for that, as soon as the last one
/// ended). A step is `SCAN <cursor> MATCH simp:log:* COUNT <scanCount> TYPE stream` plus one
/// pipeline of `XLEN` and `XRANGE - + COUNT 1` (the oldest entry, whose text starts with its
/// storage time) per log found, so the sampler's cost is bounded by the schedule: at the
/// defaults at most one SCAN of 1,000 keys a second (a keyspace of a million keys is swept in
/// about 17 minutes), whatever the keyspace and the number of scrapes.
/// The gauges show the last complete sweep; `simp_inbox_sampled_timestamp_seconds` says when
/// it completed. The sweep uses a Redis connection of its own, so it neither queues behind nor
/// delays the relay's calls, and does not count in `simp_redis_calls_total`.
///
/// Every relay sharing a Redis reports the same store: aggregate with `max`, not `sum`.
/// Confined to the event loop of the endpoint that owns it.
final class InboxSampler: @unchecked Sendable {
    private let redis: any RedisCommands
    private let eventLoop: EventLoop
    private let schedule: InboxSamplingSchedule
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
    /// The step in progress, which a later `advance` waits for rather than stepping in parallel.
    private var running: EventLoopFuture<Void>?
    /// When the sweep under way (or the last one) started.
    private var sweepStarted: NIODeadline?
    private var timer: RepeatedTask?

    /// - Parameters:
    ///   - redis: the relay's Redis or Redis Cluster; the sampler opens connections of its own to it.
    ///   - clock: wall-clock milliseconds since the epoch.
    init(
        redis endpoint: RedisEndpoint, registry: PrometheusCollectorRegistry, on eventLoop: EventLoop,
        schedule: InboxSamplingSchedule = .standard,
        clock: @escaping @Sendable () -> Int64 = { WallClock.millisecondsSinceEpoch() }
    ) {
        self.redis = endpoint.makeClient(eventLoop: eventLoop, logger: Logger(label: "simp.inbox-sampler"))
        self.eventLoop = eventLoop
        var schedule = schedule
        schedule.scanCount = max(1, schedule.scanCount)
        self.schedule = schedule
        self.clock = clock
        func describe(_ name: String, _ help: String) -> MetricNameDescriptor {
            MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
        }
        messages = registry.makeGauge(
            descriptor: describe(
                "simp_inbox_stored_messages",
                "Entries (stored messages and stored receipts) in all users' logs in Redis; the same for every relay sharing it."))
        inboxes = registry.makeGauge(
            descriptor: describe(
                "simp_inbox_users", "Users whose log in Redis holds at least one entry."))
        oldestAge = registry.makeGauge(
            descriptor: describe(
                "simp_inbox_oldest_age_seconds", "Age of the oldest entry in any user's log (0 when all are empty)."))
        sampledAt = registry.makeGauge(
            descriptor: describe(
                "simp_inbox_sampled_timestamp_seconds",
                "When the inbox figures were last complete (a full sweep of the keyspace), in seconds since the Unix epoch; 0 before the first."))
    }

    /// Starts sampling in the background: a step at every `InboxSamplingSchedule.stepInterval` tick while
    /// a sweep is under way or due.
    func start() {
        eventLoop.execute { [self] in
            guard timer == nil else { return }
            timer = eventLoop.scheduleRepeatedTask(initialDelay: .zero, delay: schedule.stepInterval) { [self] _ in
                let now = NIODeadline.now()
                let sweeping = sweep.masters != nil || sweep.cursor != "0" || sweep.node > 0
                guard sweeping || sweepStarted.map({ now - $0 >= schedule.sweepInterval }) ?? true else { return }
                if !sweeping { sweepStarted = now }
                _ = advance()
            }
        }
    }

    /// Takes one step of the sweep (the background timer's work; tests call it directly).
    /// Never fails: if Redis does not answer, the gauges keep their last complete figures (the
    /// sweep resumes at the next step).
    func advance() -> EventLoopFuture<Void> {
        eventLoop.preconditionInEventLoop()
        if let running { return running }
        let done = step()
        running = done
        done.whenComplete { [self] _ in running = nil }
        return done
    }

    /// Brings the age of the oldest entry up to date from memory (at each scrape).
    func publish() {
        eventLoop.preconditionInEventLoop()
        guard completedOnce else { return }
        let age = completedOldest.map { max(0, clock() - $0) } ?? 0
        oldestAge.set(Double(age) / 1000)
    }

    /// Stops the background steps and closes the sampler's Redis connection.
    func shutdown() async {
        let timer = try? await eventLoop.submit { [self] in
            defer { self.timer = nil }
            return self.timer
        }.get()
        timer?.cancel()
        await redis.shutdown()
    }

    private func step() -> EventLoopFuture<Void> {
        let masters = sweep.masters.map { eventLoop.makeSucceededFuture($0) } ?? redis.masters().hop(to: eventLoop)
        return masters.flatMap { [self] masters -> EventLoopFuture<Void> in
            sweep.masters = masters
            guard sweep.node < masters.count else {
                complete()
                return eventLoop.makeSucceededVoidFuture()
            }
            let page = masters[sweep.node].scanPage(
                cursor: sweep.cursor, matching: InboxStore.logKeyPrefix + "*", type: "stream", count: schedule.scanCount, on: eventLoop)
            return page.flatMap { [self] page in
                heads(of: page.keys).flatMap { [self] in
                    sweep.cursor = page.cursor
                    if page.cursor == "0" { sweep.node += 1 }
                    if sweep.node == masters.count { complete() }
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
        publish()
    }
}
