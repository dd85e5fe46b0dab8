import Foundation
import NIOConcurrencyHelpers
import NIOCore
import SIMPCore
import SIMPRedis
import SIMPRelay

/// What `simp-bench` was asked to do (its flags, parsed).
public struct BenchOptions: Sendable {
    /// `host:port` of a running relay; nil starts a private relay and Redis.
    public var server: (host: String, port: Int)?
    /// Redis for a relay the bench starts; nil starts a private `redis-server`.
    public var redis: RedisEndpoint?
    /// `simp-server` to start; nil means the one next to `simp-bench`.
    public var relayBinary: URL?
    /// Metrics endpoint (`host:port`) of a running relay, to count its Redis round trips.
    public var relayMetrics: (host: String, port: Int)?
    /// Process id of a running relay on this machine, for its CPU time and memory.
    public var relayPid: Int32?
    public var pairs = 10
    /// Relays the bench starts on one Redis (with `server` nil); above 1, every message goes
    /// from its sender's relay to another relay holding its receiver.
    public var relays = 1
    public var rate: Double = 10_000
    public var size = 200
    public var duration: TimeAmount = .seconds(10)
    public var warmup: TimeAmount = .seconds(2)
    public var findMax = false
    /// Messages a pair may have unresolved before it skips offers (0: no limit).
    public var window = 100
    /// Receivers batch their receipts per sender and read burst (false: one per message).
    public var batchesReceipts = true
    /// `--find-max`: a rate is sustained while delivery and receipts keep up with the offered
    /// rate within this fraction…
    public var sustainedFraction = 0.98
    /// …and p99 latency stays under this.
    public var maxP99: TimeAmount = .milliseconds(10)
    /// Idle sessions to hold open during the run.
    public var sessions = 0
    /// Messages per timer tick (1: each at its own time; `LoadGenerator.Parameters.messagesPerTick`).
    public var messagesPerTick = 1
    /// How long receivers may hold receipts to batch them (zero: until the read burst ends).
    public var receiptDelay = ReceiptBatcher.defaultDelay
    /// Receivers send a datagram copy of each receipt frame (docs/PROTOCOL.md §6.1).
    public var receiptDatagrams = true
    /// Event loops (threads) the bench splits its pairs across (`ParallelLoad`); simp-bench's
    /// default is 2 (1 on a one-core machine).
    public var loops = 1
    public init() {}
}

/// Runs one `simp-bench` invocation: sets up the relay, the pairs and idle sessions, measures,
/// and tears everything down.
public enum BenchRunner {
    public static func run(_ options: BenchOptions, progress: @escaping @Sendable (String) -> Void) async throws -> BenchReport {
        OpenFileLimit.raiseToHardLimit()
        let local: LocalRelay? =
            options.server == nil
            ? try await LocalRelay.start(binary: options.relayBinary ?? LocalRelay.siblingBinary(), redis: options.redis)
            : nil
        var others: [LocalRelay] = []
        func stopRelays() async {
            for other in others { await other.stop() }
            await local?.stop()
        }
        if let local, options.relays > 1 {
            do {
                for _ in 1..<options.relays {
                    others.append(try await LocalRelay.start(binary: options.relayBinary ?? LocalRelay.siblingBinary(), redis: local.redisEndpoint))
                }
            } catch {
                await stopRelays()
                throw error
            }
        }
        let target = options.server ?? ("127.0.0.1", local!.controlPort)
        let metrics = options.relayMetrics ?? local.map { ("127.0.0.1", $0.metricsPort) }
        let pid = options.relayPid ?? local?.pid
        var parameters = LoadGenerator.Parameters()
        parameters.host = target.host
        parameters.port = target.port
        parameters.extraPorts = others.map(\.controlPort)
        parameters.pairs = options.pairs
        parameters.size = options.size
        parameters.window = options.window
        parameters.batchesReceipts = options.batchesReceipts
        parameters.messagesPerTick = options.messagesPerTick
        parameters.receiptDelay = options.receiptDelay
        parameters.receiptDatagrams = options.receiptDatagrams
        let idle = IdleSessions()
        var generator: ParallelLoad?
        do {
            var sessions: BenchReport.Sessions?
            let redis = options.redis ?? local?.redisEndpoint
            var redisBefore: RedisStats?
            if options.sessions > 0 {
                let baselineRSS = pid.flatMap(ProcessStats.read)?.rssBytes
                redisBefore = await redis.asyncMap { await RedisStats.read($0) } ?? nil
                progress("connecting \(options.sessions) idle sessions")
                let started = NIODeadline.now()
                let connected = try await idle.connect(
                    count: options.sessions, prefix: parameters.userPrefix,
                    host: target.host, port: target.port, localHost: parameters.localHost)
                sessions = .init(
                    connected: connected, connectSeconds: seconds(.now() - started),
                    relayRSSBytes: pid.flatMap(ProcessStats.read)?.rssBytes, relayBaselineRSSBytes: baselineRSS)
            }
            var report: BenchReport
            if options.findMax {
                report = try await findMax(options, metrics: metrics, pid: pid, progress: progress) {
                    try await connectedGenerator(parameters, loops: options.loops, fresh: true)
                }
            } else {
                progress("registering \(options.pairs) pairs")
                generator = try await connectedGenerator(parameters, loops: options.loops, fresh: false)
                let redisStart = await redis.asyncMap { await RedisStats.read($0) } ?? nil
                report = try await measure(generator!, options, rate: options.rate, metrics: metrics, pid: pid)
                let redisEnd = await redis.asyncMap { await RedisStats.read($0) } ?? nil
                sessions?.addIdleCosts(
                    relay: report.relay, window: options.duration, redis: (redisBefore, redisStart, redisEnd),
                    relayRSSNow: pid.flatMap(ProcessStats.read)?.rssBytes)
            }
            report.sessions = sessions
            report.parameters.relay =
                options.server.map { "\($0.host):\($0.port)" }
                ?? (options.relays > 1
                    ? "\(options.relays) simp-server children on one Redis; every message crosses relays (relay figures: the first)"
                    : "started by simp-bench (child simp-server)")
            await generator?.close()
            await idle.close()
            await stopRelays()
            return report
        } catch {
            await generator?.close()
            await idle.close()
            await stopRelays()
            throw error
        }
    }

    /// Load generators on `loops` event loops whose pairs are registered; `fresh` gives
    /// their users new names.
    static func connectedGenerator(_ parameters: LoadGenerator.Parameters, loops: Int, fresh: Bool) async throws -> ParallelLoad {
        var parameters = parameters
        if fresh { parameters.userPrefix = "bench-\(UInt32.random(in: .min ... .max))" }
        let generator = ParallelLoad(parameters: parameters, loops: loops)
        do {
            try await generator.connect()
        } catch {
            await generator.close()
            throw error
        }
        return generator
    }

    /// One measurement window at `rate`, with the relay's figures when they can be read.
    static func measure(
        _ generator: ParallelLoad, _ options: BenchOptions, rate: Double,
        metrics: (host: String, port: Int)?, pid: Int32?
    ) async throws -> BenchReport {
        let before = try await metrics.asyncMap { try await MetricsScrape.fetch(host: $0.host, port: $0.port) }
        let cpu = NIOLockedValueBox<(start: Double?, end: Double?)>((nil, nil))
        let benchCPU = NIOLockedValueBox<(start: Double?, end: Double?)>((nil, nil))
        let result = try await generator.measure(rate: rate, duration: options.duration, warmup: options.warmup) { starts in
            if let own = ProcessStats.read(pid: getpid()) {
                benchCPU.withLockedValue { Self.record(own.cpuSeconds, atStart: starts, in: &$0) }
            }
            guard let pid, let stats = ProcessStats.read(pid: pid) else { return }
            cpu.withLockedValue { Self.record(stats.cpuSeconds, atStart: starts, in: &$0) }
        }
        let after = try await metrics.asyncMap { try await MetricsScrape.fetch(host: $0.host, port: $0.port) }
        let parameters = BenchReport.Parameters(
            mode: options.findMax ? "find-max" : (options.sessions > 0 ? "sessions" : "load"), relay: "",
            pairs: options.pairs, rate: rate, size: options.size, durationSeconds: seconds(options.duration),
            warmupSeconds: seconds(options.warmup), messagesPerTick: options.messagesPerTick,
            receiptDelayUs: options.receiptDelay.nanoseconds / 1000, receiptDatagrams: options.receiptDatagrams,
            loops: generator.generators.count,
            sessions: options.sessions > 0 ? options.sessions : nil)
        var report = BenchReport(parameters: parameters, result: result)
        let own = benchCPU.withLockedValue { $0 }
        if let start = own.start, let end = own.end { report.benchCPUSeconds = end - start }
        if pid != nil || metrics != nil {
            var relay = BenchReport.RelayFigures()
            let window = cpu.withLockedValue { $0 }
            if let start = window.start, let end = window.end { relay.cpuSeconds = end - start }
            if let stats = pid.flatMap(ProcessStats.read) {
                relay.peakRSSBytes = stats.peakRSSBytes
                relay.rssBytes = stats.rssBytes
            }
            if let before, let after {
                let forwarded = after.total("simp_datagrams_forwarded_total") - before.total("simp_datagrams_forwarded_total")
                let trips = after.total("simp_redis_calls_total") - before.total("simp_redis_calls_total")
                relay.forwarded = forwarded
                relay.redisRoundTrips = trips
                relay.redisRoundTripsPerForwarded = forwarded > 0 ? trips / forwarded : nil
            }
            report.relay = relay
        }
        return report
    }

    /// Doubles the rate from `options.rate` until a step is not sustained, then bisects
    /// between the last sustained rate and the first unsustained one (five more steps). Each
    /// step has pairs of its own (`makeGenerator`), so the backlog of an overloaded step does
    /// not weigh on the next.
    static func findMax(
        _ options: BenchOptions, metrics: (host: String, port: Int)?, pid: Int32?,
        progress: @escaping @Sendable (String) -> Void, makeGenerator: () async throws -> ParallelLoad
    ) async throws -> BenchReport {
        func measureFresh(rate: Double) async throws -> BenchReport {
            let generator = try await makeGenerator()
            do {
                let report = try await measure(generator, options, rate: rate, metrics: metrics, pid: pid)
                await generator.close()
                return report
            } catch {
                await generator.close()
                throw error
            }
        }
        var steps: [BenchReport.Step] = []
        var best: BenchReport?
        var low = 0.0, high: Double?
        var rate = options.rate
        for _ in 0..<20 {
            progress("find-max: offering \(Int(rate)) msg/s")
            let report = try await measureFresh(rate: rate)
            let sustained = isSustained(report, rate: rate, options)
            steps.append(
                .init(
                    offeredRate: report.offeredRate, deliveredRate: report.deliveredRate,
                    receiptRate: report.receiptRate, latencyP99: report.latencyUs.p99, sustained: sustained))
            if sustained {
                low = rate
                best = report
            } else {
                high = rate
            }
            guard let high else { rate *= 2; continue }
            if high - low <= max(0.05 * low, 100) || steps.count >= 12 { break }
            rate = low > 0 ? (low + high) / 2 : high / 2
        }
        var report: BenchReport
        if let best {
            report = best
        } else {
            report = try await measureFresh(rate: options.rate)
        }
        report.maxSustainedRate = best == nil ? 0 : low
        report.steps = steps
        return report
    }

    static func isSustained(_ report: BenchReport, rate: Double, _ options: BenchOptions) -> Bool {
        let keepUp = options.sustainedFraction * rate
        return report.offeredRate >= keepUp && report.deliveredRate >= keepUp && report.receiptRate >= keepUp
            && report.failed == 0 && report.unresolved == 0
            && report.latencyUs.p99 <= UInt64(options.maxP99.nanoseconds / 1000)
    }

    static func seconds(_ amount: TimeAmount) -> Double { Double(amount.nanoseconds) / 1e9 }

    /// Keeps a CPU-time sample as the start or the end of the measured window.
    static func record(_ seconds: Double, atStart: Bool, in window: inout (start: Double?, end: Double?)) {
        if atStart { window.start = seconds } else { window.end = seconds }
    }
}

extension Optional {
    fileprivate func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let value = self else { return nil }
        return try await transform(value)
    }
}

extension BenchReport.Sessions {
    /// Fills the per-session figures: the relay's RSS over its baseline, its CPU in the
    /// measured `window` (from `relay`), and Redis's commands per second between `start` and
    /// `end` (around the window) and memory over its value `before` the sessions.
    mutating func addIdleCosts(
        relay: BenchReport.RelayFigures?, window: TimeAmount,
        redis: (before: RedisStats?, start: RedisStats?, end: RedisStats?), relayRSSNow: Int?
    ) {
        let count = Double(max(1, connected))
        if let relayRSSNow { relayRSSBytes = relayRSSNow }
        if let rss = relayRSSBytes, let base = relayBaselineRSSBytes { rssBytesPerSession = Double(rss - base) / count }
        if let cpu = relay?.cpuSeconds, window > .zero {
            let cores = cpu / (Double(window.nanoseconds) / 1e9)
            relayCores = cores
            relayCPUPercentPer10kSessions = cores * 100 * 10_000 / count
        }
        if let start = redis.start, let end = redis.end, end.at > start.at {
            let rate = Double(end.commandsProcessed - start.commandsProcessed) / (Double((end.at - start.at).nanoseconds) / 1e9)
            redisCommandsPerSecond = rate
            redisCommandsPerSessionPerSecond = rate / count
        }
        if let end = redis.end {
            redisUsedMemoryBytes = end.usedMemoryBytes
            if let before = redis.before { redisMemoryBytesPerSession = Double(end.usedMemoryBytes - before.usedMemoryBytes) / count }
        }
    }
}
