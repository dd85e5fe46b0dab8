import NIOConcurrencyHelpers
import NIOCore
import SIMPCore
import SIMPE2E

/// Where a `SIMPClient` is in its life. Every call that needs the engine goes through
/// `SIMPClient.onEngine` (work) or `SIMPClient.reading` (answers), which decide under the
/// lock that holds this state: NIO drops a task submitted to a loop that has shut down, so a
/// call that reached the loop after `close()` would wait forever.
enum ClientLifecycle: Sendable {
    /// Connected, connecting, or not yet connected: calls run on the engine's event loop.
    case open
    /// `close()` began: no new work (`SIMPClientError.closed`); answers still come from the
    /// engine, whose loop runs until `close()` is done with it.
    case closing
    /// The engine's loop is shut down (or about to be); answers are what the engine said when
    /// the client closed.
    case closed(ClosedEngine)
}

/// What the client's read-only accessors ask the engine: the live engine on its loop, or,
/// after `close()`, what it said at the end.
protocol EngineReadings {
    var statistics: ClientStatistics { get }
    var relayId: String? { get }
    var datagramPath: DatagramPath { get }
    var stopped: ClientSession.Stop? { get }
    var keptInMemoryOnly: [UInt64: SIMPMessage] { get }
    var identity: IdentityKey? { get }
}

extension ClientEngine: EngineReadings {
    var datagramPath: DatagramPath { session.datagramPath }
    var identity: IdentityKey? { endToEnd?.identity }
}

/// The engine's last answers, taken on its loop as the last thing `close()` does there.
struct ClosedEngine: EngineReadings, Sendable {
    let statistics: ClientStatistics
    let relayId: String?
    let datagramPath: DatagramPath
    let stopped: ClientSession.Stop?
    let keptInMemoryOnly: [UInt64: SIMPMessage]
    let identity: IdentityKey?

    init(_ engine: some EngineReadings) {
        statistics = engine.statistics
        relayId = engine.relayId
        datagramPath = engine.datagramPath
        stopped = engine.stopped
        keptInMemoryOnly = engine.keptInMemoryOnly
        identity = engine.identity
    }
}

extension ClientEngine {
    /// Runs `work` on the engine's loop and answers `waiter` with its future's outcome. Call
    /// it under the lifecycle's lock while the loop runs: the wait is registered on the loop in
    /// the same task as the work, so it is in place before `close()` can let the loop stop.
    /// (Awaiting the future after the lock, `future.get()`, asked the loop for the callback
    /// later: a `close()` that finished in between left that request on a stopped loop, which
    /// NIO drops with "Cannot schedule tasks on an EventLoop that has already shut down", and
    /// the caller waiting forever.)
    fileprivate func run<T: Sendable>(
        _ work: @escaping @Sendable () throws -> EventLoopFuture<T>, answering waiter: CheckedContinuation<T, Error>
    ) {
        eventLoop.execute { [eventLoop] in
            let future: EventLoopFuture<T>
            do { future = try work() } catch { future = eventLoop.makeFailedFuture(error) }
            future.whenComplete { waiter.resume(with: $0) }
        }
    }
}

extension SIMPClient {
    /// Runs `work` with the engine on its event loop and waits for the future it returns.
    /// Throws `SIMPClientError.closed` once `close()` has begun: the work is submitted under
    /// the lifecycle's lock, so it either reaches the loop before `close()` lets the loop stop
    /// (and runs: NIO runs every task queued before a shutdown) or is refused.
    func onEngine<T: Sendable>(_ work: @escaping @Sendable (ClientEngine) throws -> EventLoopFuture<T>) async throws -> T {
        let engine = self.engine
        return try await withCheckedThrowingContinuation { waiter in
            do {
                try lifecycle.withLockedValue { state in
                    guard case .open = state else { throw SIMPClientError.closed }
                    engine.run({ try work(engine) }, answering: waiter)
                }
            } catch {
                waiter.resume(throwing: error)
            }
        }
    }

    /// `onEngine` for work that answers at once.
    func onEngine<T: Sendable>(now work: @escaping @Sendable (ClientEngine) throws -> T) async throws -> T {
        try await onEngine { engine in engine.eventLoop.makeCompletedFuture { try work(engine) } }
    }

    /// One of the engine's answers (`EngineReadings`): asked on its loop while the loop runs
    /// (also while `close()` is under way), and after `close()` taken from what the engine said
    /// at the end, so it never waits on a loop that stopped.
    func reading<T: Sendable>(_ answer: @escaping @Sendable (any EngineReadings) -> T) async throws -> T {
        let engine = self.engine
        return try await withCheckedThrowingContinuation { waiter in
            lifecycle.withLockedValue { state in
                if case .closed(let last) = state { return waiter.resume(returning: answer(last)) }
                engine.run({ engine.eventLoop.makeSucceededFuture(answer(engine)) }, answering: waiter)
            }
        }
    }

    /// The end of `close()`, on the engine's loop after the goodbye: callers still waiting get
    /// their answer (`ClientEngine.closed`), from here on every call is refused or answered from
    /// the engine's last answers, and the loop may stop.
    func finishClosing() async {
        let engine = self.engine
        do {
            try await engine.eventLoop.submit { [lifecycle] in
                engine.closed()
                lifecycle.withLockedValue { $0 = .closed(ClosedEngine(engine)) }
            }.get()
        } catch {
            // The loop stopped already: nothing runs on it, so the engine is read from here.
            lifecycle.withLockedValue { $0 = .closed(ClosedEngine(engine)) }
        }
    }
}
