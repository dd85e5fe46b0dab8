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
    /// Further running relays (after `server`) the idle sessions are spread over.
    public var extraServers: [HostPort] = []
    /// Process ids of running relays on this machine (`server` first), for their CPU time and memory.
    public var relayPids: [Int32] = []
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
    /// Idle sessions to hold open during the run (spread over the relays, held by
    /// `SessionWorkers` child processes).
    public var sessions = 0
    /// How many local addresses, 127.0.0.1, 127.0.0.2 …, the idle sessions connect from (0:
    /// one per 10,000 sessions).
    public var sourceAddresses = 0
    /// The idle sessions keep alive as idle reference clients do (`IdleSessionPlan.referenceKeepalive`).
    public var referenceKeepalive = false
    /// The executable of the session workers (`simp-bench`); nil: the one next to `simp-server`'s.
    public var workerBinary: URL?
    /// What happens to relay 0 one second into the window (`--restart-relay`, `--kill-relay`).
    public var disruption: Disruption?
    /// How long the bench waits for the sessions of a killed relay to come back.
    public var recoveryTimeout: TimeAmount = .seconds(60)

    /// What the bench does to relay 0 during the window.
    public enum Disruption: String, Sendable {
        /// SIGKILL, then started again at once on the same ports: its users come back to it.
        case restart
        /// SIGKILL: its users move to the other relays.
        case kill
    }

    /// The local addresses the idle sessions connect from.
    public func sourceHosts() -> [String] {
        let count = sourceAddresses > 0 ? sourceAddresses : max(1, (sessions + 9_999) / 10_000)
        return (0..<count).map { "127.0.0.\($0 + 1)" }
    }
    /// Messages per timer tick (1: each at its own time; `LoadGenerator.Parameters.messagesPerTick`).
    public var messagesPerTick = 1
    /// How long receivers may hold receipts to batch them (zero: until the read burst ends).
    public var receiptDelay = ReceiptBatcher.defaultDelay
    /// Receivers send a datagram copy of each receipt frame (docs/PROTOCOL.md §6.1).
    public var receiptDatagrams = true
    /// The pairs' datagrams go over their control connections (`LoadGenerator.Parameters.tcpPath`).
    public var tcpPath = false
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
        let started = local.map { [$0] + others } ?? []
        let target = options.server ?? ("127.0.0.1", local!.controlPort)
        let addresses = options.server.map { [HostPort(host: $0.host, port: $0.port)] + options.extraServers } ?? started.map(\.address)
        let relayPids: () -> [Int32] = { options.relayPids.isEmpty ? started.map(\.pid) : options.relayPids }
        // With a disruption, relay 0 dies: the message figures come from relay 1, the pairs' relay.
        let metricsRelay = options.disruption != nil ? others.first : local
        let metrics = options.relayMetrics ?? metricsRelay.map { ("127.0.0.1", $0.metricsPort) }
        var parameters = LoadGenerator.Parameters()
        parameters.host = target.host
        parameters.port = target.port
        parameters.extraPorts = others.map(\.controlPort)
        if options.disruption != nil, others.count >= 1 {
            // Relay 0 is the one killed: the pairs stay on the others.
            parameters.port = others[0].controlPort
            parameters.extraPorts = others.dropFirst().map(\.controlPort)
        }
        parameters.pairs = options.pairs
        parameters.size = options.size
        parameters.window = options.window
        parameters.batchesReceipts = options.batchesReceipts
        parameters.messagesPerTick = options.messagesPerTick
        parameters.receiptDelay = options.receiptDelay
        parameters.receiptDatagrams = options.receiptDatagrams
        parameters.tcpPath = options.tcpPath
        var workers: SessionWorkers?
        var generator: ParallelLoad?
        func stopAll() async {
            await generator?.close()
            await workers?.stop()
            await stopRelays()
        }
        do {
            var sessions: BenchReport.Sessions?
            let redis = options.redis ?? local?.redisEndpoint
            var redisBefore: RedisStats?
            var baselines: [Int?] = []
            var kernelBefore: KernelMemory?
            var plan = IdleSessionPlan(
                relays: addresses, sourceHosts: options.sourceHosts(), count: options.sessions, prefix: parameters.userPrefix)
            // Relay 0, the one killed, holds every idle session. A restarted relay's users come
            // back to it; a killed one's move to the others.
            if options.disruption != nil { plan.home = 0 }
            plan.failover = options.disruption != .restart
            plan.referenceKeepalive = options.referenceKeepalive
            if options.sessions > 0 {
                baselines = relayPids().map { ProcessStats.read(pid: $0)?.rssBytes }
                redisBefore = await redis.asyncMap { await RedisStats.read($0) } ?? nil
                kernelBefore = KernelMemory.read()
                progress("connecting \(options.sessions) idle sessions to \(addresses.count) relay(s) from \(plan.sourceHosts.count) address(es)")
                workers = try SessionWorkers(
                    binary: options.workerBinary ?? URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath(), plan: plan)
                let seconds = try await workers!.waitUntilConnected(options.sessions, timeout: .seconds(600))
                sessions = .init(connected: workers!.connected, connectSeconds: seconds, relayRSSBytes: nil, relayBaselineRSSBytes: nil)
                sessions?.sourceAddresses = plan.sourceHosts.count
            }
            var report: BenchReport
            if options.findMax {
                report = try await findMax(options, metrics: metrics, pids: relayPids(), progress: progress) {
                    try await connectedGenerator(parameters, loops: options.loops, fresh: true)
                }
            } else {
                progress("registering \(options.pairs) pairs")
                generator = try await connectedGenerator(parameters, loops: options.loops, fresh: false)
                let redisStart = await redis.asyncMap { await RedisStats.read($0) } ?? nil
                let watched = relayPids() + (workers?.pids ?? [])
                let holders = workers
                async let disrupted = disrupt(options, relay: local, workers: holders, progress: progress)
                let window = try await measure(generator!, options, rate: options.rate, metrics: metrics, pids: watched)
                report = window.report
                let redisEnd = await redis.asyncMap { await RedisStats.read($0) } ?? nil
                let now = relayPids().map { ProcessStats.read(pid: $0)?.rssBytes }
                let relayCPU = Array(window.cpuSeconds.prefix(now.count))
                sessions?.addIdleCosts(
                    relays: plan.relays.indices.map { index in
                        .init(
                            sessions: plan.sessions(onRelay: index), baselineRSSBytes: index < baselines.count ? baselines[index] : nil,
                            rssBytes: index < now.count ? now[index] : nil, cpuSeconds: index < relayCPU.count ? relayCPU[index] : nil)
                    },
                    window: options.duration, redis: (redisBefore, redisStart, redisEnd), kernel: (kernelBefore, KernelMemory.read()))
                if let workers, !workers.pids.isEmpty {
                    let workerCPU = window.cpuSeconds.dropFirst(now.count).compactMap { $0 }.reduce(0, +)
                    sessions?.loadGeneratorCores = workerCPU / seconds(options.duration)
                }
                sessions?.disruption = try await disrupted
            }
            sessions?.loadAverage = KernelMemory.loadAverage()
            report.sessions = sessions
            report.parameters.relay =
                options.server.map { "\($0.host):\($0.port)" + (options.extraServers.isEmpty ? "" : " and \(options.extraServers.count) more") }
                ?? (options.relays > 1
                    ? "\(options.relays) simp-server children on one Redis; every message crosses relays (relay figures: the first)"
                    : "started by simp-bench (child simp-server)")
            await stopAll()
            return report
        } catch {
            await stopAll()
            throw error
        }
    }

    /// `--restart-relay` / `--kill-relay`: one second into the measured window, relay 0 (the
    /// bench's first) is killed with SIGKILL, and with `.restart` started again on the same
    /// ports. Returns how long its sessions took to come back (to any relay).
    static func disrupt(
        _ options: BenchOptions, relay: LocalRelay?, workers: SessionWorkers?, progress: @escaping @Sendable (String) -> Void
    ) async throws -> BenchReport.Disruption? {
        guard let kind = options.disruption, let relay, let workers else { return nil }
        try await Task.sleep(nanoseconds: UInt64((options.warmup + .seconds(1)).nanoseconds))
        let before = workers.connected
        progress("killing relay 0 (pid \(relay.pid)) with \(before) sessions up")
        let killed = NIODeadline.now()
        await relay.kill()
        var disruption = BenchReport.Disruption(kind: kind.rawValue, sessionsBefore: before)
        if kind == .restart {
            try await relay.restart()
            disruption.relayServingAfterSeconds = seconds(.now() - killed)
        }
        var lowest = before
        let marks: [(fraction: Double, keyPath: WritableKeyPath<BenchReport.Disruption, Double?>)] = [
            (0.5, \.half), (0.9, \.ninetyPercent), (0.99, \.ninetyNinePercent), (1, \.all),
        ]
        // The marks count the sessions missing at the lowest point (the relay's share) back.
        while NIODeadline.now() - killed < options.recoveryTimeout {
            let now = workers.connected
            lowest = min(lowest, now)
            let elapsed = seconds(.now() - killed)
            if lowest < before {
                let back = Double(now - lowest) / Double(before - lowest)
                for mark in marks where disruption[keyPath: mark.keyPath] == nil && back >= mark.fraction {
                    disruption[keyPath: mark.keyPath] = elapsed
                }
            }
            if disruption.all != nil { break }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        disruption.lowest = lowest
        progress("sessions back: \(workers.connected) of \(before)" + (disruption.all.map { String(format: " after %.2f s", $0) } ?? ""))
        return disruption
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

    /// One measurement window at `rate`: the report with the relay's figures when they can be
    /// read (the first of `pids` is the relay they come from), and the CPU seconds each of
    /// `pids` used in the window.
    static func measure(
        _ generator: ParallelLoad, _ options: BenchOptions, rate: Double,
        metrics: (host: String, port: Int)?, pids: [Int32]
    ) async throws -> (report: BenchReport, cpuSeconds: [Double?]) {
        let before = try await metrics.asyncMap { try await MetricsScrape.fetch(host: $0.host, port: $0.port) }
        let watched = [getpid()] + pids
        let cpu = NIOLockedValueBox<(start: [Double?], end: [Double?])>(([], []))
        let result = try await generator.measure(rate: rate, duration: options.duration, warmup: options.warmup) { starts in
            let now = watched.map { ProcessStats.read(pid: $0)?.cpuSeconds }
            cpu.withLockedValue { if starts { $0.start = now } else { $0.end = now } }
        }
        let window = cpu.withLockedValue { $0 }
        let used: [Double?] = window.end.indices.map { index in
            guard index < window.start.count, let start = window.start[index], let end = window.end[index] else { return nil }
            return end - start
        }
        let after = try await metrics.asyncMap { try await MetricsScrape.fetch(host: $0.host, port: $0.port) }
        let parameters = BenchReport.Parameters(
            mode: options.findMax ? "find-max" : (options.sessions > 0 ? "sessions" : "load"), relay: "",
            pairs: options.pairs, rate: rate, size: options.size, durationSeconds: seconds(options.duration),
            warmupSeconds: seconds(options.warmup), messagesPerTick: options.messagesPerTick,
            receiptDelayUs: options.receiptDelay.nanoseconds / 1000, receiptDatagrams: options.receiptDatagrams,
            tcpPath: options.tcpPath, loops: generator.generators.count,
            sessions: options.sessions > 0 ? options.sessions : nil)
        var report = BenchReport(parameters: parameters, result: result)
        report.benchCPUSeconds = used.first ?? nil
        if !pids.isEmpty || metrics != nil {
            var relay = BenchReport.RelayFigures()
            relay.cpuSeconds = used.count > 1 ? used[1] : nil
            if let stats = pids.first.flatMap(ProcessStats.read) {
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
        return (report, Array(used.dropFirst()))
    }

    /// Doubles the rate from `options.rate` until a step is not sustained, then bisects
    /// between the last sustained rate and the first unsustained one (five more steps). Each
    /// step has pairs of its own (`makeGenerator`), so the backlog of an overloaded step does
    /// not weigh on the next.
    static func findMax(
        _ options: BenchOptions, metrics: (host: String, port: Int)?, pids: [Int32],
        progress: @escaping @Sendable (String) -> Void, makeGenerator: () async throws -> ParallelLoad
    ) async throws -> BenchReport {
        func measureFresh(rate: Double) async throws -> BenchReport {
            let generator = try await makeGenerator()
            do {
                let report = try await measure(generator, options, rate: rate, metrics: metrics, pids: Array(pids.prefix(1))).report
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

}

extension Optional {
    fileprivate func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let value = self else { return nil }
        return try await transform(value)
    }
}

extension BenchReport.Sessions {
    /// Fills the per-session figures: each relay's RSS over its baseline and CPU in the measured
    /// `window`, their totals, Redis's commands per second between `start` and `end` (around
    /// the window) and its memory over its value `before` the sessions, and the kernel's socket
    /// memory over its value before them.
    mutating func addIdleCosts(
        relays: [BenchReport.RelayShare], window: TimeAmount, redis: (before: RedisStats?, start: RedisStats?, end: RedisStats?),
        kernel: (before: KernelMemory?, after: KernelMemory?) = (nil, nil)
    ) {
        let count = Double(max(1, connected))
        let windowSeconds = Double(window.nanoseconds) / 1e9
        self.relays = relays.map { $0.withCosts(window: windowSeconds) }
        let rss = relays.compactMap(\.rssBytes), base = relays.compactMap(\.baselineRSSBytes)
        if !rss.isEmpty, rss.count == relays.count { relayRSSBytes = rss.reduce(0, +) }
        if base.count == relays.count, !base.isEmpty { relayBaselineRSSBytes = base.reduce(0, +) }
        if let rss = relayRSSBytes, let base = relayBaselineRSSBytes { rssBytesPerSession = Double(rss - base) / count }
        let cpu = relays.compactMap(\.cpuSeconds)
        if !cpu.isEmpty, windowSeconds > 0 {
            let cores = cpu.reduce(0, +) / windowSeconds
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
        if let before = kernel.before, let after = kernel.after {
            kernelSlabBytesPerSession = Double(after.slabBytes - before.slabBytes) / count
            kernelTCPBufferBytes = after.tcpBufferBytes
        }
    }
}

extension BenchReport.RelayShare {
    /// With the per-session figures of its share computed.
    func withCosts(window seconds: Double) -> Self {
        var share = self
        if let cpu = cpuSeconds, seconds > 0 { share.cores = cpu / seconds }
        guard sessions > 0 else { return share } // e.g. the relay a killed one's sessions move to
        let count = Double(sessions)
        if let rss = rssBytes, let base = baselineRSSBytes { share.rssBytesPerSession = Double(rss - base) / count }
        if let cores = share.cores { share.cpuPercentPer10kSessions = cores * 100 * 10_000 / count }
        return share
    }
}
