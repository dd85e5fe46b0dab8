import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SIMPLocalServers
import SIMPRedis

/// A real Redis Cluster on 127.0.0.1: `redis-server --cluster-enabled yes` on free ports (each
/// port and its bus port, +10000), joined by `redis-cli --cluster create … --cluster-replicas`,
/// ready once every node says `cluster_state:ok` and every replica is in sync.
///
/// `shared()` is one cluster per test run (stopped when the test process exits); tests that
/// kill or reshard nodes and need a known layout afterwards start their own with `start()`.
public final class RedisClusterProcess: Sendable {
    /// Every node's client port, masters first as created.
    public let ports: [Int]
    private let directory: URL
    private let processes: NIOLockedValueBox<[Int: LaunchedProcess]>

    /// A URL for each node (seeds for `RedisClusterClient`).
    public var seeds: [RedisURL] { ports.map { RedisURL(host: "127.0.0.1", port: $0) } }

    private init(ports: [Int], directory: URL, processes: [Int: LaunchedProcess]) {
        self.ports = ports
        self.directory = directory
        self.processes = NIOLockedValueBox(processes)
    }

    /// One cluster for the whole test run, started on first use.
    public static func shared() async throws -> RedisClusterProcess {
        try await SharedCluster.instance.get()
    }

    /// Starts `masters` masters with `replicas` replicas each and waits until the cluster is healthy.
    /// - Parameter nodeTimeoutMilliseconds: `cluster-node-timeout`: how soon a dead master is failed over.
    public static func start(masters: Int = 3, replicas: Int = 1, nodeTimeoutMilliseconds: Int = 1000) async throws -> RedisClusterProcess {
        guard let server = LocalRedisServer.executable(named: "redis-server"),
            LocalRedisServer.executable(named: "redis-cli") != nil
        else {
            throw RedisError("redis-server and redis-cli are needed (apt-get install -y redis-server redis-tools)")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-cluster-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        SharedCluster.made(directory)
        let ports = try ClusterPorts.pick(count: masters * (1 + replicas))
        var processes: [Int: LaunchedProcess] = [:]
        for port in ports {
            let process = try LaunchedProcess(
                server,
                [
                    "--port", String(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                    "--cluster-config-file", "nodes-\(port).conf", "--cluster-node-timeout", String(nodeTimeoutMilliseconds),
                    "--dir", directory.path, "--save", "", "--appendonly", "no", "--daemonize", "no",
                    "--loglevel", "warning", "--logfile", directory.appendingPathComponent("\(port).log").path,
                ])
            processes[port] = process
            SharedCluster.started(process.pid)
        }
        let cluster = RedisClusterProcess(ports: ports, directory: directory, processes: processes)
        do {
            for port in ports { try await cluster.waitForPing(port) }
            _ = try await cluster.cli(
                ["--cluster", "create"] + ports.map { "127.0.0.1:\($0)" }
                    + ["--cluster-replicas", String(replicas), "--cluster-yes"])
            try await cluster.waitUntilHealthy(timeout: 30)
        } catch {
            await cluster.stop()
            throw error
        }
        return cluster
    }

    /// Kills a node with SIGKILL (as a crash would).
    public func kill(port: Int) {
        processes.withLockedValue { $0.removeValue(forKey: port) }?.signal(SIGKILL)
    }

    /// Kills every node and removes their files.
    public func stop() async {
        for port in ports { kill(port: port) }
        try? FileManager.default.removeItem(at: directory)
    }

    /// The ports of the running masters.
    public func masterPorts() async throws -> [Int] {
        var masters: [Int] = []
        for port in runningPorts {
            let role = try await command(port, ["ROLE"])
            if role.array?.first?.string == "master" { masters.append(port) }
        }
        return masters
    }

    /// A node's id (`CLUSTER MYID`).
    public func nodeID(port: Int) async throws -> String {
        guard let id = try await command(port, ["CLUSTER", "MYID"]).string else { throw RedisError("no CLUSTER MYID from \(port)") }
        return id
    }

    /// Moves `slots` slots from one master to another with `redis-cli --cluster reshard`.
    public func reshard(slots: Int, from: Int, to: Int) async throws {
        let source = try await nodeID(port: from)
        let target = try await nodeID(port: to)
        _ = try await cli([
            "--cluster", "reshard", "127.0.0.1:\(from)", "--cluster-from", source, "--cluster-to", target,
            "--cluster-slots", String(slots), "--cluster-yes",
        ])
    }

    /// Waits until every running node reports `cluster_state:ok`, all agree on the slot map and
    /// every running replica's link to its master is up.
    public func waitUntilHealthy(timeout: Double) async throws {
        let deadline = Date().addingTimeInterval(timeout)
        var last = ""
        while Date() < deadline {
            do {
                var maps = Set<String>()
                var healthy = true
                for port in runningPorts {
                    let info = try await command(port, ["CLUSTER", "INFO"]).string ?? ""
                    let replication = try await command(port, ["INFO", "replication"]).string ?? ""
                    healthy =
                        healthy && info.contains("cluster_state:ok")
                        && (!replication.contains("role:slave") || replication.contains("master_link_status:up"))
                    maps.insert("\(try await command(port, ["CLUSTER", "SLOTS"]))")
                }
                if healthy && maps.count == 1 { return }
                last = "nodes disagree or are not ok"
            } catch { last = "\(error)" }
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        throw RedisError("Redis Cluster on \(ports) not healthy after \(timeout) s: \(last)")
    }

    private var runningPorts: [Int] { processes.withLockedValue { Array($0.keys).sorted() } }

    /// One command to one node, without following redirections.
    public func command(_ port: Int, _ arguments: [String]) async throws -> RedisValue {
        let client = RedisClient(url: RedisURL(host: "127.0.0.1", port: port), timeout: .seconds(2))
        defer { Task { await client.shutdown() } }
        return try await client.command(arguments)
    }

    private func waitForPing(_ port: Int) async throws {
        for _ in 0..<100 {
            if (try? await command(port, ["PING"])) == .status("PONG") { return }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        throw RedisError("cluster node on port \(port) did not start")
    }

    private func cli(_ arguments: [String]) async throws -> String {
        try await ToolProcess.run("redis-cli", arguments, in: directory)
    }
}

/// The run-wide cluster, and every cluster node's pid and directory, so none outlives the test process.
private enum SharedCluster {
    static let instance = SharedTask { try await RedisClusterProcess.start() }
    private static let pids = NIOLockedValueBox<[pid_t]>([])
    private static let directories = NIOLockedValueBox<[URL]>([])
    private static let registered = NIOLockedValueBox(false)

    static func started(_ pid: pid_t) {
        pids.withLockedValue { $0.append(pid) }
        let first = registered.withLockedValue { done -> Bool in
            defer { done = true }
            return !done
        }
        if first { atexit { SharedCluster.killAll() } }
    }

    static func made(_ directory: URL) {
        directories.withLockedValue { $0.append(directory) }
    }

    static func killAll() {
        for pid in pids.withLockedValue({ $0 }) { kill(pid, SIGKILL) }
        for directory in directories.withLockedValue({ $0 }) { try? FileManager.default.removeItem(at: directory) }
    }
}

/// A value made once, by the first caller, awaited by all.
final class SharedTask<Value: Sendable>: Sendable {
    private let task: NIOLockedValueBox<Task<Value, Error>?> = NIOLockedValueBox(nil)
    private let make: @Sendable () async throws -> Value

    init(_ make: @escaping @Sendable () async throws -> Value) { self.make = make }

    func get() async throws -> Value {
        let task = self.task.withLockedValue { task in
            if let task { return task }
            let made = Task { try await make() }
            task = made
            return made
        }
        return try await task.value
    }
}

/// Client ports whose cluster bus port (+10000) is free too.
enum ClusterPorts {
    static func pick(count: Int) throws -> [Int] {
        var ports: [Int] = []
        var candidate = Int.random(in: 20000...38000)
        while ports.count < count {
            candidate += 1
            guard candidate < 40000 else { throw RedisError("no free ports for a Redis Cluster") }
            if isFree(candidate) && isFree(candidate + 10000) { ports.append(candidate) }
        }
        return ports
    }

    private static func isFree(_ port: Int) -> Bool {
        guard
            let channel = try? ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .bind(host: "127.0.0.1", port: port).wait()
        else { return false }
        try? channel.close().wait()
        return true
    }
}
