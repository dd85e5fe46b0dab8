import HeapModule
import NIOCore

/// Virtual time for the simulator: a queue of actions ordered by time, then by scheduling order,
/// so a run never depends on anything but its inputs.
final class EventQueue {
    private struct Event: Comparable {
        let time: TimeAmount
        let order: Int
        let action: () -> Void
        static func < (a: Event, b: Event) -> Bool { (a.time, a.order) < (b.time, b.order) }
        static func == (a: Event, b: Event) -> Bool { a.time == b.time && a.order == b.order }
    }

    /// Time since the simulation started.
    private(set) var now: TimeAmount = .zero
    private var events = Heap<Event>()
    private var scheduled = 0
    /// A fixed origin for the `NIODeadline`s the core types are given.
    private static let origin: UInt64 = 1_000_000_000_000

    /// `now` as the deadline the core types understand.
    var deadline: NIODeadline { deadline(at: now) }

    func deadline(at time: TimeAmount) -> NIODeadline {
        .uptimeNanoseconds(Self.origin + UInt64(time.nanoseconds))
    }

    func time(of deadline: NIODeadline) -> TimeAmount {
        .nanoseconds(Int64(deadline.uptimeNanoseconds) - Int64(Self.origin))
    }

    func schedule(after delay: TimeAmount, _ action: @escaping () -> Void) {
        schedule(at: now + max(delay, .zero), action)
    }

    func schedule(at time: TimeAmount, _ action: @escaping () -> Void) {
        scheduled += 1
        events.insert(Event(time: max(time, now), order: scheduled, action: action))
    }

    /// Why `run` returned.
    enum Outcome: Equatable {
        /// `stop` held.
        case stopped
        /// The next event is later than the limit.
        case reachedLimit
        /// No event was left.
        case empty
        /// `check` said to stop.
        case interrupted
    }

    /// Runs events in order until none is left, the next is later than `limit`, or `stop`
    /// holds; every `checkEvery` events `check` may end the run by returning false.
    func run(
        until limit: TimeAmount, stop: () -> Bool = { false }, checkEvery: Int, check: () -> Bool = { true }
    ) -> Outcome {
        var count = 0
        while true {
            if stop() { return .stopped }
            guard let next = events.min else { return .empty }
            guard next.time <= limit else { return .reachedLimit }
            count += 1
            if count % checkEvery == 0, !check() { return .interrupted }
            events.removeMin()
            now = next.time
            next.action()
        }
    }
}

/// One direction of a client's access link in the simulator: the shared `ImpairedLink` model
/// plus the queue that carries its packets.
final class SimLink {
    private var model: ImpairedLink<ByteBuffer>
    private let queue: EventQueue
    /// When the workload started (blackouts are relative to it); nil before.
    private let workloadStart: () -> TimeAmount?
    private var releaseScheduled: TimeAmount?
    /// While the far end is paused: when packets start travelling again.
    private let heldUntil: () -> TimeAmount?

    init(
        conditions: LinkConditions, random: SeededRandom, queue: EventQueue, heldUntil: @escaping () -> TimeAmount? = { nil },
        workloadStart: @escaping () -> TimeAmount?
    ) {
        self.model = ImpairedLink(conditions: conditions, random: random)
        self.queue = queue
        self.heldUntil = heldUntil
        self.workloadStart = workloadStart
    }

    /// The delay of a packet that the model delays by `after`, counted from the end of a pause.
    private func delay(_ after: TimeAmount) -> TimeAmount {
        guard let until = heldUntil() else { return after }
        return until - queue.now + after
    }

    var conditions: LinkConditions { model.conditions }
    /// Whether a blackout covers this moment.
    var isDown: Bool { model.isDown(at: elapsed) }
    var statistics: LinkStatistics { model.statistics }

    /// Time on the link's clock (since the workload started; far negative before).
    private var elapsed: TimeAmount {
        guard let start = workloadStart() else { return .hours(-1_000) }
        return queue.now - start
    }

    /// Sends a datagram; `arrive` is called for each copy that gets through.
    func send(_ bytes: ByteBuffer, arrive: @escaping (ByteBuffer) -> Void) {
        for delivery in model.send(bytes, at: elapsed) {
            queue.schedule(after: delay(delivery.after)) { arrive(delivery.packet) }
        }
        scheduleRelease(arrive)
    }

    /// Sends a TCP segment; `arrive` is called if it gets through.
    func sendSegment(arrive: @escaping () -> Void) {
        if let travel = model.segment(at: elapsed) { queue.schedule(after: delay(travel), arrive) }
    }

    /// The mean one-way delay, for a TCP connection's first RTT estimate.
    var meanDelay: TimeAmount { .nanoseconds(Int64((conditions.delayMs + conditions.jitterMs / 2) * 1e6)) }

    private func scheduleRelease(_ arrive: @escaping (ByteBuffer) -> Void) {
        guard let next = model.nextRelease, let start = workloadStart() else { return }
        let at = start + next
        if let releaseScheduled, releaseScheduled <= at, releaseScheduled >= queue.now { return }
        releaseScheduled = at
        queue.schedule(at: at) { [self] in
            releaseScheduled = nil
            for delivery in model.releaseExpired(at: elapsed) {
                queue.schedule(after: delivery.after) { arrive(delivery.packet) }
            }
            scheduleRelease(arrive)
        }
    }
}
