import Foundation
import SIMPLocalServers
import SIMPRedis
import Subprocess
import SystemPackage

/// Runs a command-line tool (redis-cli, openssl, a script, a C tool a test built) to completion
/// with swift-subprocess, without blocking a concurrency thread, and returns what it printed.
/// (Children that must outlive the call are `LaunchedProcess`es.)
public enum ToolProcess {
    /// Runs `name` (found on PATH) with `arguments` in `directory`; throws with its output
    /// (standard output and error together) when it exits with a non-zero status.
    @discardableResult
    public static func run(_ name: String, _ arguments: [String], in directory: URL) async throws -> String {
        guard let executable = LocalRedisServer.executable(named: name) else { throw RedisError("\(name) not found on PATH") }
        let (status, text) = try await outcome(executable, arguments, in: directory, standardError: .combined)
        guard status == 0 else { throw RedisError("\(name) \(arguments.joined(separator: " ")) failed (\(status)): \(text)") }
        return text
    }

    /// Where a tool's standard error goes.
    public enum StandardError: Sendable {
        /// Into the returned text, interleaved with standard output.
        case combined
        /// Nowhere.
        case discarded
        /// Returned instead of standard output (which is discarded).
        case only
    }

    /// Runs `executable` with `arguments`, with `environment` added to this process's, in
    /// `directory` (default: this process's), and returns its exit status (128 + the signal's
    /// number if a signal ended it, as a shell reports it) and what it printed.
    public static func outcome(
        _ executable: URL, _ arguments: [String], environment: [String: String] = [:], in directory: URL? = nil,
        standardError: StandardError = .discarded
    ) async throws -> (status: Int32, output: String) {
        let variables = Dictionary(
            uniqueKeysWithValues: environment.compactMap { name, value in
                Environment.Key(rawValue: name).map { ($0, Optional(value)) }
            })
        let configuration = Configuration(
            executable: .path(FilePath(executable.path)), arguments: Arguments(arguments),
            environment: .inherit.updating(variables), workingDirectory: directory.map { FilePath($0.path) })
        let limit = 16 << 20
        let status: TerminationStatus, text: String
        switch standardError {
        case .combined:
            let result = try await Subprocess.run(configuration, output: .string(limit: limit), error: .combinedWithOutput)
            (status, text) = (result.terminationStatus, result.standardOutput)
        case .discarded:
            let result = try await Subprocess.run(configuration, output: .string(limit: limit), error: .discarded)
            (status, text) = (result.terminationStatus, result.standardOutput)
        case .only:
            let result = try await Subprocess.run(configuration, output: .discarded, error: .string(limit: limit))
            (status, text) = (result.terminationStatus, result.standardError)
        }
        switch status {
        case .exited(let code): return (code, text)
        case .signaled(let signal): return (128 + signal, text)
        }
    }
}
