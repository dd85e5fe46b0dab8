import NIOCore

/// The connection lifecycle's entry points (`ConnectionLifecycle`, with the session's `Backoff`
/// and `stopped`): what follows a failed connect and a lost control connection, which relay is
/// next, and whether the client connects at all. The shell opens what they name and says what
/// they decide; it decides nothing itself.
extension ClientSession {
    /// What the shell does about the connection after a failed attempt or a lost connection,
    /// besides carrying out the output (which holds the reconnect plan, if any).
    public enum ConnectionStep: Sendable, Equatable {
        /// Nothing: the user closed the client.
        case nothing
        /// Connect again as the output's `reconnect` plans (none without a reconnect policy),
        /// to the next relay when `failover` says the relay changed.
        case reconnect(failover: Failover?)
        /// Stopped for good: say why; callers waiting for outcomes learn the connection was lost.
        case stop(Stop)
        /// Lost and not reconnecting (no reconnect policy): tell the user; callers waiting for
        /// outcomes learn the connection was lost.
        case offline
        /// Lost because the user closed the client: callers waiting for outcomes learn it.
        case closedByUser
    }

    /// The relay to connect to changed from `from` to `to` (indices in `Configuration.relays`).
    public struct Failover: Sendable, Equatable {
        public let from: Int
        public let to: Int

        public init(from: Int, to: Int) {
            self.from = from
            self.to = to
        }
    }

    /// A connect attempt (not one of the first connect's, `ConnectionLifecycle.firstConnectFailed`)
    /// failed: the next one is planned and goes to the next relay, unless the relay refused the
    /// login (the session stops) or the user closed the client. `random` is in [0, 1).
    public mutating func connectFailed(random: Double) -> (output: Output, step: ConnectionStep) {
        lifecycle.loginEnded()
        guard !lifecycle.closedByUser else { return (Output(), .nothing) }
        let output = connectAttemptFailed(random: random)
        if let stopped, case .loginRefused = stopped { return (output, .stop(stopped)) }
        return (output, .reconnect(failover: failover()))
    }

    /// The registered control connection closed: with a reconnect policy (and unless the user
    /// closed the client or the session stopped for good) the next attempt is planned and
    /// goes to the next relay; otherwise the session stops (taken over, token expired) or is
    /// offline. `random` is in [0, 1).
    public mutating func connectionLost(random: Double) -> (output: Output, step: ConnectionStep) {
        if let stopped, case .tokenExpired = stopped { return (controlLost(mayReconnect: false, random: random), .stop(stopped)) }
        let takenOver: Stop? = if let stopped, case .takenOver = stopped { stopped } else { nil }
        let mayReconnect = configuration.reconnect != nil && !lifecycle.closedByUser && takenOver == nil
        let moved = mayReconnect ? failover() : nil
        let output = controlLost(mayReconnect: mayReconnect, random: random)
        if mayReconnect { return (output, .reconnect(failover: moved)) }
        if let takenOver { return (output, .stop(takenOver)) }
        return (output, lifecycle.closedByUser ? .closedByUser : .offline)
    }

    /// Whether a planned connect goes ahead now (not after the user closed the client).
    public var mayConnect: Bool { !lifecycle.closedByUser }

    /// The user closed the client: nothing is connected again.
    public mutating func userClosed() { lifecycle.userClosed() }

    /// The user asks to connect again (`simp chat`'s `/reconnect`): true when the session had
    /// stopped for good and now connects again (`resumeAfterStop`); false when it had not, or
    /// the user closed the client.
    public mutating func connectAgainRequested() -> Bool {
        guard !lifecycle.closedByUser else { return false }
        return resumeAfterStop()
    }

    private mutating func failover() -> Failover? {
        lifecycle.failover().map { Failover(from: $0, to: lifecycle.current) }
    }
}
