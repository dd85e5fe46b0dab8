import Foundation
import NIOCore
import SIMPRedis

/// `simp-bench abuse`: each attack of `AbuseAttack` against a `simp-server` with its default
/// limits (and `--no-login`) and a private Redis, with the third user (`AbuseProbe`) logging in
/// and sending throughout. For each attack: the relay's RSS before, at its highest during, and
/// `settle` after the attack ended; Redis's memory growth; the third user's logins and sends.
public enum AbuseBench {
    public struct Options: Sendable {
        /// How long each attack lasts.
        public var duration: Duration = .seconds(10)
        /// How long after an attack the RSS is read again.
        public var settle: Duration = .seconds(30)
        /// The idle attack's connections (fewer if the open-file limit is lower).
        public var idle = 2000, halfFrame = 200
        public var attacks = AbuseAttack.allCases
        /// More `simp-server` arguments (after the bench's own).
        public var relayArguments: [String] = []
        public init() {}
    }

    public static func run(options: Options, relayBinary: URL, progress: @Sendable (String) -> Void = { _ in }) async throws -> AbuseReport {
        let files = AttackSocket.raiseOpenFileLimit() // before the relay starts: it inherits the limit
        let relay = try await LocalRelay.start(
            binary: relayBinary, redis: nil,
            extraArguments: [ // the relay's defaults again, after LocalRelay's load settings
                "--connection-rate", "100", "--login-rate", "5", "--max-connections-per-host", "2000",
                "--max-unauthenticated-per-host", "256", "--max-unauthenticated", "8192", "--message-rate", "500",
            ] + options.relayArguments)
        var rows: [AbuseReport.Row] = []
        do {
            try await warmUp(relay)
            for attack in options.attacks {
                progress(
                    "\(attack.rawValue): \(Int(AbuseProbe.seconds(options.duration))) s, then \(Int(AbuseProbe.seconds(options.settle))) s settling")
                rows.append(try await measure(attack, relay: relay, options: options, openFiles: files))
            }
        } catch {
            await relay.kill()
            throw error
        }
        _ = await relay.stop()
        return AbuseReport(
            machine: .current(), durationSeconds: AbuseProbe.seconds(options.duration), settleSeconds: AbuseProbe.seconds(options.settle), rows: rows)
    }

    /// A few seconds of the probe alone, so the baseline holds the relay's ordinary pools.
    private static func warmUp(_ relay: LocalRelay) async throws {
        _ = try await AbuseProbe(port: relay.controlPort).run(for: .seconds(3), name: "warm-up")
    }

    private static func measure(_ attack: AbuseAttack, relay: LocalRelay, options: Options, openFiles: Int) async throws -> AbuseReport.Row {
        let tag = attack.rawValue.split(separator: " ").first.map(String.init) ?? "attack"
        let redisBefore = await RedisStats.read(relay.redisEndpoint)?.usedMemoryBytes ?? 0
        let before = ProcessStats.read(pid: relay.pid)
        let rssBefore = before?.rssBytes ?? 0
        let peak = RSSPeak(pid: relay.pid)
        let sampler = Task { await peak.sample(every: .milliseconds(250)) }
        var row = AbuseReport.Row(attack: attack)
        let port = relay.controlPort
        let probe = Task { try await AbuseProbe(port: port).run(for: options.duration, name: "\(tag)-probe") }
        switch attack {
        case .idleConnections:
            let headroom = max(100, (openFiles - 600) * 10 / 11) // the relay, Redis and the bench share the limit
            let idle = min(options.idle, headroom), half = min(options.halfFrame, max(10, headroom / 10))
            let opened = ContinuousClock.now
            let sockets = try AbuseAttack.openIdle(idle, halfFrame: half, port: port)
            row.openedInSeconds = AbuseProbe.seconds(ContinuousClock.now - opened)
            row.offered = sockets.count
            while ContinuousClock.now - opened < .seconds(40), !sockets.allSatisfy(\.isClosedByPeer) {
                try await Task.sleep(for: .milliseconds(250))
            }
            row.allClosedAfterSeconds = sockets.allSatisfy(\.isClosedByPeer) ? AbuseProbe.seconds(ContinuousClock.now - opened) : nil
            for socket in sockets { socket.close() }
        default:
            row.offered = try await AbuseAttack.flood(
                attack, port: port, from: "127.0.0.\(66 + (AbuseAttack.allCases.firstIndex(of: attack) ?? 0))", user: "mallory-\(tag)",
                victim: "warm-up-dave", for: options.duration)
        }
        row.probe = try await probe.value
        row.relayCPUSeconds = (ProcessStats.read(pid: relay.pid)?.cpuSeconds ?? 0) - (before?.cpuSeconds ?? 0)
        let redisAfter = await RedisStats.read(relay.redisEndpoint)?.usedMemoryBytes ?? 0
        row.rssDuringMB = Double(await peak.highest) / 1e6
        try await Task.sleep(for: options.settle)
        sampler.cancel()
        row.rssBeforeMB = Double(rssBefore) / 1e6
        row.rssAfterMB = Double(ProcessStats.read(pid: relay.pid)?.rssBytes ?? 0) / 1e6
        row.redisGrowthMB = Double(redisAfter - redisBefore) / 1e6
        return row
    }
}

/// The highest RSS a process reached while sampled.
actor RSSPeak {
    let pid: Int32
    private(set) var highest = 0
    init(pid: Int32) { self.pid = pid }

    func sample(every interval: Duration) async {
        while !Task.isCancelled {
            highest = max(highest, ProcessStats.read(pid: pid)?.rssBytes ?? 0)
            try? await Task.sleep(for: interval)
        }
    }
}
