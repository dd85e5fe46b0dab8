import Foundation
import NIOConcurrencyHelpers
import NIOCore

/// A child process this program starts and keeps running beyond the call that starts it: a
/// private `redis-server` or Redis Cluster node, a `simp-server` for the bench, a `simp` under
/// test. It can be signalled at any time (SIGTERM, SIGSTOP, SIGKILL for fault tests), and its
/// exit awaited without blocking a concurrency thread.
///
/// The one launcher for such children. It wraps Foundation's `Process`, not swift-subprocess:
/// swift-subprocess's `run` scopes a child to one async call, which does not return until the
/// child has exited, and its `Execution` (the only way to signal the child) must not escape that
/// call's closure. These children live across calls instead (started in one test step, stopped
/// or crashed in another, a shared cluster killed from an `atexit` handler), so they would each
/// need a detached task holding `run` open and a mailbox of signals into its closure: a process
/// object rebuilt around an API made to prevent one. One-shot tools (run, collect the output)
/// use swift-subprocess (`ToolProcess` in SIMPTestSupport).
public final class LaunchedProcess: Sendable {
    private let process = Process()
    private let exit = NIOLockedValueBox<(status: Int32?, waiters: [CheckedContinuation<Int32, Never>])>((nil, []))

    /// Starts `executable` with `arguments`. `environment` replaces this process's environment
    /// (nil: inherit it). Standard input, output and error not given are the null device.
    public init(
        _ executable: URL, _ arguments: [String], environment: [String: String]? = nil,
        standardInput: FileHandle? = nil, standardOutput: FileHandle? = nil, standardError: FileHandle? = nil
    ) throws {
        process.executableURL = executable
        process.arguments = arguments
        if let environment { process.environment = environment }
        process.standardInput = standardInput ?? FileHandle.nullDevice
        process.standardOutput = standardOutput ?? FileHandle.nullDevice
        process.standardError = standardError ?? FileHandle.nullDevice
        process.terminationHandler = { [exit] finished in
            let waiters = exit.withLockedValue { state -> [CheckedContinuation<Int32, Never>] in
                state.status = finished.terminationStatus
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume(returning: finished.terminationStatus) }
        }
        try process.run()
    }

    /// The child's process id (for `/proc` readings).
    public var pid: pid_t { process.processIdentifier }

    /// The exit status once the child has exited; nil while it runs.
    public var exitedStatus: Int32? { exit.withLockedValue { $0.status } }

    /// Sends a signal (SIGTERM, SIGSTOP, SIGCONT, SIGKILL …); nothing once the child has exited,
    /// so a signal can never reach a process that took over its id.
    public func signal(_ number: Int32) {
        exit.withLockedValue { state in
            if state.status == nil { _ = kill(process.processIdentifier, number) }
        }
    }

    /// Waits for the exit status.
    public func exitStatus() async -> Int32 {
        await withCheckedContinuation { continuation in
            let done = exit.withLockedValue { state -> Int32? in
                if state.status == nil { state.waiters.append(continuation) }
                return state.status
            }
            if let done { continuation.resume(returning: done) }
        }
    }

    /// Waits for the exit status; after `timeout` the child is killed (SIGKILL) and nil returned.
    public func exitStatus(within timeout: TimeAmount) async -> Int32? {
        let killed = NIOLockedValueBox(false)
        let killer = Task { [self] in
            try await Task.sleep(nanoseconds: UInt64(max(timeout.nanoseconds, 0)))
            exit.withLockedValue { state in
                guard state.status == nil else { return } // it exited by itself just in time
                _ = kill(process.processIdentifier, SIGKILL)
                killed.withLockedValue { $0 = true }
            }
        }
        let status = await exitStatus()
        killer.cancel()
        return killed.withLockedValue { $0 } ? nil : status
    }

    /// Sends `number` (default SIGTERM) and waits up to `timeout` for the exit status; a child
    /// still running then is killed and nil returned.
    @discardableResult
    public func stop(signal number: Int32 = SIGTERM, timeout: TimeAmount) async -> Int32? {
        signal(number)
        return await exitStatus(within: timeout)
    }
}
