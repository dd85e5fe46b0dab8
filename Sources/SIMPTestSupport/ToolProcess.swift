import Foundation
import SIMPRedis
import SIMPLocalServers

/// Runs a command-line tool (redis-cli, openssl) to completion without blocking a concurrency
/// thread, and returns what it printed.
public enum ToolProcess {
    /// Runs `name` (found on PATH) with `arguments` in `directory`; throws with its output
    /// when it exits with a non-zero status.
    @discardableResult
    public static func run(_ name: String, _ arguments: [String], in directory: URL) async throws -> String {
        guard let executable = LocalRedisServer.executable(named: name) else { throw RedisError("\(name) not found on PATH") }
        let output = directory.appendingPathComponent("\(name)-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let handle = try FileHandle(forWritingTo: output)
        defer {
            try? handle.close()
            try? FileManager.default.removeItem(at: output)
        }
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.currentDirectoryURL = directory
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = handle
        process.standardError = handle
        let status = try await withCheckedThrowingContinuation { (done: CheckedContinuation<Int32, Error>) in
            process.terminationHandler = { done.resume(returning: $0.terminationStatus) }
            do { try process.run() } catch { done.resume(throwing: error) }
        }
        let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        guard status == 0 else { throw RedisError("\(name) \(arguments.joined(separator: " ")) failed (\(status)): \(text)") }
        return text
    }
}
