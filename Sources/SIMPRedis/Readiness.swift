import NIOCore

/// Whether a subscription is in place, and the callers waiting until it is. Used on one event
/// loop only (inside a `NIOLoopBoundBox`).
struct Readiness {
    private(set) var ready = false
    private var waiters: [EventLoopPromise<Void>] = []

    /// Succeeds `promise` now if ready, else once `becameReady()` is called; fails it with
    /// `error()` after `timeout` if still waiting.
    mutating func wait(
        _ promise: EventLoopPromise<Void>, timeout: TimeAmount, on loop: EventLoop,
        error: @escaping @Sendable () -> Error
    ) {
        if ready { return promise.succeed() }
        waiters.append(promise)
        loop.scheduleTask(in: timeout) { promise.fail(error()) }
    }

    mutating func becameReady() {
        ready = true
        let waiting = waiters
        waiters = []
        for waiter in waiting { waiter.succeed() }
    }

    mutating func lost() { ready = false }
}

extension EventLoop {
    /// Runs `body` on this loop (at once when already on it) and completes on `caller`'s loop.
    func run<Value: Sendable>(
        answeringOn caller: EventLoop,
        _ body: @escaping @Sendable () -> EventLoopFuture<Value>
    ) -> EventLoopFuture<Value> {
        guard inEventLoop else { return flatSubmit(body).hop(to: caller) }
        return body().hop(to: caller)
    }
}
