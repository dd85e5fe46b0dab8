import Foundation
import SIMPLocalServers

/// A built executable of this package (`simp`, `simp-server`) run as a child process, with its
/// output captured to files. Waiting never blocks a concurrency thread.
public final class ChildProcess: Sendable {
    private let process: LaunchedProcess
    private let stdoutURL: URL
    private let stderrURL: URL

    /// The `$SIMP_HOME` of children whose test does not choose one (and when the test run has
    /// none): one temporary directory per test run, so tests never write into the user's `~/.simp`.
    private static let sharedHome: String = {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("simp-test-home-\(getpid())")
        try? FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        return home.path
    }()

    /// Starts `executable` (a product name, or an absolute path) with `arguments`, with `environment` added to
    /// this process's. Stdin is `standardInput` (default: the null device). With a `terminal`
    /// (a pseudo-terminal's child side) stdin, stdout and stderr are that terminal instead.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:],
        standardInput: FileHandle? = nil, terminal: FileHandle? = nil
    ) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-child-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        stdoutURL = directory.appendingPathComponent("stdout")
        stderrURL = directory.appendingPathComponent("stderr")
        _ = FileManager.default.createFile(atPath: stdoutURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrURL.path, contents: nil)
        process = try LaunchedProcess(
            try Self.locate(executable), arguments,
            environment: ProcessInfo.processInfo.environment.merging(["SIMP_HOME": Self.sharedHome]) { existing, _ in existing }
                .merging(environment) { $1 },
            standardInput: terminal ?? standardInput,
            standardOutput: try terminal ?? FileHandle(forWritingTo: stdoutURL),
            standardError: try terminal ?? FileHandle(forWritingTo: stderrURL))
    }

    /// The child's process id.
    public var pid: Int32 { process.pid }

    /// Everything written to standard output so far.
    public var standardOutput: String { (try? String(contentsOf: stdoutURL, encoding: .utf8)) ?? "" }
    /// Everything written to standard error so far.
    public var standardError: String { (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? "" }

    /// Sends a signal (e.g. SIGTERM); nothing once the process has exited.
    public func signal(_ number: Int32) { process.signal(number) }

    /// Waits for the exit status; after `timeout` seconds the process is killed and nil returned.
    /// The default is generous (twice `Eventually.generousBound`): a process that ends at once
    /// costs nothing more, and one that first drains (`simp chat`'s /quit waits up to 10 s for
    /// receipts) can take many seconds on a loaded machine.
    public func exitStatus(timeout: Double = 60) async -> Int32? {
        await process.exitStatus(within: .nanoseconds(Int64(timeout * 1e9)))
    }

    /// Finds a product of this package: `$SIMP_BIN_DIR`, next to the test bundle, or `.build/debug`;
    /// an absolute path is taken as it is (a program a test built itself).
    public static func locate(_ name: String) throws -> URL {
        if name.hasPrefix("/") { return URL(fileURLWithPath: name) }
        var candidates: [URL] = []
        if let directory = ProcessInfo.processInfo.environment["SIMP_BIN_DIR"] {
            candidates.append(URL(fileURLWithPath: directory))
        }
        let bundle = Bundle.main.bundleURL
        candidates += [bundle, bundle.deletingLastPathComponent()]
        let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        candidates.append(packageRoot.appendingPathComponent(".build/debug"))
        for directory in candidates {
            let url = directory.appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        throw ChildProcessError(description: "\(name) not built; run `swift build` first (looked in \(candidates.map(\.path)))")
    }
}

/// Why a child process could not be started (its executable not built, or no pseudo-terminal).
public struct ChildProcessError: Error, CustomStringConvertible {
    /// What went wrong, for the test's failure message.
    public let description: String
}
