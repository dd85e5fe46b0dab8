import NIOCore

/// Watches a simulated run from outside virtual time: every few hundred events it says whether
/// the run goes on, and when a progress report is due. A run stops at its bound on wall-clock
/// time, or at once when virtual time has stayed at one instant for `stallTime` of wall time
/// and at least `stallEvents` events (something re-arms itself without delay, so virtual time
/// would never move again).
struct RunGuard {
    /// What the run does next.
    enum Decision: Equatable {
        case proceed
        /// Go on, and report progress now.
        case report
        /// Stop: `.wallTimeLimit` or `.stalled`.
        case stop(RunEnd)
    }

    let wallLimit: Duration
    let progressInterval: Duration
    let stallTime: Duration
    let stallEvents: Int
    /// Events between two checks.
    let eventsPerCheck: Int
    private let start: ContinuousClock.Instant
    private var nextProgress: ContinuousClock.Instant
    private var instant: (virtual: TimeAmount, since: ContinuousClock.Instant, events: Int)

    init(
        start: ContinuousClock.Instant, wallLimit: TimeAmount, progressInterval: TimeAmount,
        stallTime: TimeAmount = Simulation.stallWallTime, stallEvents: Int = Simulation.stallEvents, eventsPerCheck: Int
    ) {
        self.start = start
        self.wallLimit = .nanoseconds(wallLimit.nanoseconds)
        self.progressInterval = .nanoseconds(progressInterval.nanoseconds)
        self.stallTime = .nanoseconds(stallTime.nanoseconds)
        self.stallEvents = stallEvents
        self.eventsPerCheck = eventsPerCheck
        self.nextProgress = start + self.progressInterval
        self.instant = (.zero, start, 0)
    }

    /// Called every `eventsPerCheck` events with the virtual time and the wall clock.
    mutating func check(virtual: TimeAmount, wall: ContinuousClock.Instant) -> Decision {
        if virtual != instant.virtual { instant = (virtual, wall, 0) }
        instant.events += eventsPerCheck
        if instant.events >= stallEvents, wall - instant.since >= stallTime { return .stop(.stalled) }
        if wall - start >= wallLimit { return .stop(.wallTimeLimit) }
        guard wall >= nextProgress else { return .proceed }
        nextProgress = wall + progressInterval
        return .report
    }
}
