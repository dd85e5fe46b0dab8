import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SIMPLocalServers
import SIMPRedis

/// A `simp-server` child process (and, unless a Redis URL is given, a private `redis-server`)
/// started by the bench on free loopback ports, so its CPU time and memory can be read.
public final class LocalRelay: Sendable {
    /// Its control address.
    public var address: HostPort { HostPort(host: "127.0.0.1", port: controlPort) }
    public let controlPort: Int
    /// Where it takes datagrams (on 127.0.0.1).
    public let udpPort: Int
    public let metricsPort: Int
    /// The Redis (or Redis Cluster) the relay uses.
    public let redisEndpoint: RedisEndpoint
    /// The running `simp-server` (another one after `restart`).
    private let process: NIOLockedValueBox<LaunchedProcess>
    private var relay: LaunchedProcess { process.withLockedValue { $0 } }
    /// How it was started (`restart` starts it again so).
    private let executable: String
    private let arguments: [String]
    private let redis: LocalRedisServer?
    public let logFile: URL

    /// The relay's process id, for /proc readings.
    public var pid: Int32 { relay.pid }

    /// Starts Redis (unless `redis` is given) and `simp-server` from `binary` with `extraArguments`,
    /// and waits until both answer.
    public static func start(binary: URL, redis: RedisEndpoint?, extraArguments: [String] = []) async throws -> LocalRelay {
        let privateRedis = redis == nil ? try await LocalRedisServer.start() : nil
        let redisEndpoint = redis ?? .single(privateRedis!.url)
        let (control, udp, metrics) = (try FreePort.tcp(), try FreePort.udp(), try FreePort.tcp())
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("simp-bench-relay-\(control).log")
        do {
            if privateRedis == nil { try await waitForRedis(redisEndpoint) }
            let arguments =
                [
                    "--host", "127.0.0.1", "--port", String(control), "--udp-port", String(udp),
                    "--metrics-port", String(metrics), "--redis", redisEndpoint.textWithPassword, "--log-level", "warning",
                    // The bench's users have no passwords, and its load must not be throttled.
                    "--no-login", "--message-rate", "10000000", "--connection-rate", "100000", "--login-rate", "100000",
                    "--max-connections-per-host", "1000000", "--max-unauthenticated-per-host", "1000000",
                    "--max-unauthenticated", "1000000",
                ] + extraArguments
            let relay = try launch(binary.path, arguments, log: log)
            let started = LocalRelay(
                controlPort: control, udpPort: udp, metricsPort: metrics, redisEndpoint: redisEndpoint,
                relay: relay, executable: binary.path, arguments: arguments, redis: privateRedis, logFile: log)
            try await started.waitUntilServing()
            return started
        } catch {
            await privateRedis?.stop()
            throw error
        }
    }

    private init(
        controlPort: Int, udpPort: Int, metricsPort: Int, redisEndpoint: RedisEndpoint, relay: LaunchedProcess, executable: String,
        arguments: [String],
        redis: LocalRedisServer?, logFile: URL
    ) {
        self.controlPort = controlPort
        self.udpPort = udpPort
        self.metricsPort = metricsPort
        self.redisEndpoint = redisEndpoint
        self.process = NIOLockedValueBox(relay)
        self.executable = executable
        self.arguments = arguments
        self.redis = redis
        self.logFile = logFile
    }

    /// `simp-server` next to the running executable (both are products of this package).
    public static func siblingBinary() -> URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("simp-server")
    }

    /// SIGTERM to the relay (it drains and withdraws its registrations), then Redis if private.
    /// Returns the relay's exit status, or nil if it had to be killed after `timeout`.
    @discardableResult
    public func stop(timeout: TimeAmount = .seconds(15)) async -> Int32? {
        let status = await relay.stop(signal: SIGTERM, timeout: timeout)
        await redis?.stop()
        return status
    }

    /// Kills the relay as a crash would (SIGKILL: no drain, its registrations stay in Redis).
    public func kill() async {
        await relay.stop(signal: SIGKILL, timeout: .seconds(10))
    }

    /// Starts the relay again on the same ports and Redis (after `kill`); returns when it serves.
    public func restart() async throws {
        let relay = try Self.launch(executable, arguments, log: logFile)
        process.withLockedValue { $0 = relay }
        try await waitUntilServing()
    }

    private func waitUntilServing() async throws {
        for _ in 0..<200 {
            guard relay.exitedStatus == nil else {
                let log = (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
                throw BenchError("simp-server exited at start: \(log.split(separator: "\n").last ?? "")")
            }
            if (try? await MetricsScrape.fetch(host: "127.0.0.1", port: metricsPort)) != nil { return }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        throw BenchError("simp-server did not start serving within 10 s (log: \(logFile.path))")
    }

    private static func waitForRedis(_ endpoint: RedisEndpoint) async throws {
        let client = endpoint.makeClient(eventLoop: MultiThreadedEventLoopGroup.singleton.next(), logger: Logger(label: "simp.bench.redis"))
        defer { Task { await client.shutdown() } }
        for _ in 0..<100 {
            if (try? await client.command(["PING"])) == .status("PONG") { return }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        throw BenchError("Redis at \(endpoint) does not answer")
    }

    private static func launch(_ executable: String, _ arguments: [String], log: URL) throws -> LaunchedProcess {
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let standardError = try FileHandle(forWritingTo: log)
        do {
            return try LaunchedProcess(URL(fileURLWithPath: executable), arguments, standardError: standardError)
        } catch { throw BenchError("cannot start \(executable): \(error)") }
    }
}
