import NIOCore

/// How a client retries a lost relay: exponential delays with jitter, capped.
public struct ReconnectPolicy: Sendable, Equatable {
    public var initialDelay: TimeAmount = .seconds(1)
    public var maxDelay: TimeAmount = .seconds(30)
    public var multiplier: Double = 2
    /// Each delay is scaled by a random factor in 1 ± jitter, so clients of a restarted relay
    /// do not all return at once.
    public var jitter: Double = 0.2

    public init() {}
}

/// The retry schedule of one connection: 1, 2, 4 … capped (before jitter); `reset()` after a
/// successful connection starts again from the first delay.
public struct Backoff: Sendable, Equatable {
    public let policy: ReconnectPolicy
    /// Attempts made since the last reset.
    public private(set) var attempt = 0

    public init(policy: ReconnectPolicy) { self.policy = policy }

    /// The next attempt's number (from 1) and the delay before it. `random` is uniform in [0, 1).
    public mutating func next(random: Double) -> ReconnectPlan {
        attempt += 1
        var base = Double(policy.initialDelay.nanoseconds)
        for _ in 1..<attempt { base *= policy.multiplier }
        base = min(base, Double(policy.maxDelay.nanoseconds))
        let factor = 1 + policy.jitter * (2 * random - 1)
        return ReconnectPlan(attempt: attempt, delay: .nanoseconds(Int64(base * factor)))
    }

    public mutating func reset() { attempt = 0 }
}

/// When to connect again: attempt number `attempt` (from 1, since the last success) after `delay`.
public struct ReconnectPlan: Sendable, Equatable {
    public var attempt: Int
    public var delay: TimeAmount

    public init(attempt: Int, delay: TimeAmount) {
        self.attempt = attempt
        self.delay = delay
    }
}
