import Foundation
import NIOConcurrencyHelpers
import NIOCore
import SIMPLocalServers

/// The idle sessions of a `--sessions` run, held by child processes (`simp-bench hold-sessions`)
/// of at most `perWorker` sessions each: one process may hold only as many sockets as its
/// open-file limit allows (20,000 on the machine the figures were taken on), and a worker's CPU
/// time shows what the idle sessions cost the load generator.
///
/// A worker reports `connected N` on its standard output whenever its count changes; it stops on
/// SIGTERM, and by itself when the bench is gone.
public final class SessionWorkers: Sendable {
    /// Sessions one worker holds at most.
    public static let perWorker = 15_000

    private struct Worker {
        let process: LaunchedProcess
        let output: Pipe
    }
    private let workers: [Worker]
    private let counts: NIOLockedValueBox<[Int]>
    private let failures = NIOLockedValueBox<[String]>([])

    /// Process ids of the workers (for their CPU time).
    public var pids: [Int32] { workers.map(\.process.pid) }
    /// Sessions connected now, over every worker.
    public var connected: Int { counts.withLockedValue { $0.reduce(0, +) } }

    /// Starts workers from `binary` (simp-bench itself) splitting `plan`'s sessions.
    public init(binary: URL, plan: IdleSessionPlan) throws {
        let shares = Self.split(count: plan.count, first: plan.first)
        counts = NIOLockedValueBox(Array(repeating: 0, count: shares.count))
        var started: [Worker] = []
        for (index, share) in shares.enumerated() {
            let output = Pipe()
            var arguments = ["hold-sessions", "--first", String(share.lowerBound), "--count", String(share.count), "--prefix", plan.prefix]
            for relay in plan.relays { arguments += ["--relay", relay.description] }
            for host in plan.sourceHosts { arguments += ["--source", host] }
            if !plan.failover { arguments.append("--no-failover") }
            if plan.referenceKeepalive { arguments.append("--reference-keepalive") }
            if let home = plan.home { arguments += ["--home", String(home)] }
            do {
                let process = try LaunchedProcess(
                    binary, arguments, standardOutput: output.fileHandleForWriting, standardError: FileHandle.standardError)
                started.append(Worker(process: process, output: output))
            } catch {
                for worker in started { worker.process.signal(SIGKILL) }
                throw BenchError("cannot start \(binary.path) hold-sessions: \(error)")
            }
            let lines = LineSplitter()
            output.fileHandleForReading.readabilityHandler = { [counts, failures] handle in
                for line in lines.feed(handle.availableData) {
                    let words = line.split(separator: " ", maxSplits: 1)
                    if words.first == "connected", let count = words.last.flatMap({ Int($0) }) {
                        counts.withLockedValue { $0[index] = count }
                    } else if words.first == "error" {
                        failures.withLockedValue { $0.append(String(words.last ?? "")) }
                    }
                }
            }
        }
        workers = started
    }

    /// The sessions each worker holds: consecutive numbers from `first`, at most `perWorker`
    /// each, as even as possible.
    static func split(count: Int, first: Int) -> [Range<Int>] {
        guard count > 0 else { return [] }
        let workers = (count + perWorker - 1) / perWorker
        return (0..<workers).map { index in
            (first + count * index / workers)..<(first + count * (index + 1) / workers)
        }
    }

    /// Waits until `count` sessions are connected; returns the seconds it took, or throws when a
    /// worker reports an error or `timeout` passes.
    @discardableResult
    public func waitUntilConnected(_ count: Int, timeout: TimeAmount) async throws -> Double {
        let started = NIODeadline.now()
        while connected < count {
            if let failure = failures.withLockedValue({ $0.first }) { throw BenchError("idle sessions: \(failure)") }
            if let exited = workers.first(where: { $0.process.exitedStatus != nil }) {
                throw BenchError("a hold-sessions worker exited (status \(exited.process.exitedStatus!)) with \(connected) of \(count) sessions up")
            }
            guard NIODeadline.now() - started < timeout else {
                throw BenchError("only \(connected) of \(count) idle sessions connected within \(timeout.nanoseconds / 1_000_000_000) s")
            }
            try await Task.sleep(nanoseconds: 10_000_000)
        }
        return Double((NIODeadline.now() - started).nanoseconds) / 1e9
    }

    /// Stops the workers (SIGTERM: the kernel closes their connections), waiting up to 10 s each.
    public func stop() async {
        for worker in workers {
            worker.output.fileHandleForReading.readabilityHandler = nil
            worker.process.signal(SIGTERM)
        }
        for worker in workers { _ = await worker.process.exitStatus(within: .seconds(10)) }
    }
}

/// Splits a byte stream into lines (a worker's reports).
final class LineSplitter: Sendable {
    private let pending = NIOLockedValueBox<[UInt8]>([])

    func feed(_ data: Data) -> [Substring] {
        pending.withLockedValue { pending in
            pending += data
            guard let last = pending.lastIndex(of: UInt8(ascii: "\n")) else { return [] }
            let text = String(decoding: pending[...last], as: UTF8.self)
            pending.removeSubrange(...last)
            return text.split(separator: "\n")
        }
    }
}
