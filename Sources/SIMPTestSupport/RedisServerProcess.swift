import Foundation
import NIOPosix
import SIMPRedis

/// A real `redis-server` for tests.
///
/// If `SIMP_TEST_REDIS_URL` is set (as `.ci/run` does), that server is used and left running;
/// otherwise a private `redis-server` is started on a free loopback port, without persistence,
/// and stopped by `stop()`.
public final class RedisServerProcess: @unchecked Sendable {
    public let url: RedisURL
    private var process: Process?

    private init(url: RedisURL, process: Process?) {
        self.url = url
        self.process = process
    }

    /// The server named by `SIMP_TEST_REDIS_URL`, or a new private one.
    public static func start() async throws -> RedisServerProcess {
        if let text = ProcessInfo.processInfo.environment["SIMP_TEST_REDIS_URL"], !text.isEmpty {
            return RedisServerProcess(url: try RedisURL(parsing: text), process: nil)
        }
        return try await startPrivate()
    }

    /// A new private `redis-server` on a free port.
    public static func startPrivate() async throws -> RedisServerProcess {
        let port = try FreePort.tcp()
        let server = RedisServerProcess(url: RedisURL(host: "127.0.0.1", port: port), process: try launch(port: port))
        try await server.waitUntilReady()
        return server
    }

    /// Stops a private server and starts a new, empty one on the same port (a Redis restart
    /// without persistence: every key is gone).
    public func restart() async throws {
        precondition(process != nil, "only a private redis-server can be restarted")
        await stop()
        process = try Self.launch(port: url.port)
        try await waitUntilReady()
    }

    private static func launch(port: Int) throws -> Process {
        let process = Process()
        process.executableURL = try findExecutable("redis-server")
        process.arguments = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--daemonize", "no", "--loglevel", "warning"]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// Stops a server this object started, and waits until its port is closed.
    /// (`Process.waitUntilExit()` can hang on Linux when called from a concurrency thread, so
    /// the server is asked to shut down over its own protocol instead.)
    public func stop() async {
        guard process != nil else { return }
        let client = RedisClient(url: url, timeout: .milliseconds(200))
        _ = try? await client.command(["SHUTDOWN", "NOSAVE"])
        for _ in 0..<100 {
            guard (try? await client.command(["PING"])) != nil else { break }
            try? await Task.sleep(nanoseconds: 20_000_000)
        }
        await client.shutdown()
    }

    private func waitUntilReady() async throws {
        let client = RedisClient(url: url, timeout: .milliseconds(200))
        defer { Task { await client.shutdown() } }
        for _ in 0..<100 {
            if (try? await client.command(["PING"])) == .status("PONG") { return }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        process?.terminate()
        throw RedisError("redis-server on \(url) did not start")
    }

    private static func findExecutable(_ name: String) throws -> URL {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        let directories = path.split(separator: ":").map(String.init) + ["/usr/bin", "/usr/local/bin", "/usr/sbin"]
        for directory in directories {
            let candidate = URL(fileURLWithPath: directory).appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        throw RedisError("\(name) not found: apt-get install -y redis-server")
    }
}

/// Free loopback ports, found by binding port 0.
public enum FreePort {
    /// A TCP port that was free a moment ago.
    public static func tcp() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa -> Int32 in
                guard bind(fd, sa, length) == 0 else { return -1 }
                return getsockname(fd, sa, &length)
            }
        }
        guard bound == 0 else { throw RedisError("no free port: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
