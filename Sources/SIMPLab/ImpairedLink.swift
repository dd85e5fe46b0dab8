import NIOCore

/// Counts of what a link did to its packets.
public struct LinkStatistics: Codable, Equatable, Sendable {
    public var packets = 0
    public var lost = 0
    public var lostInBlackout = 0
    public var duplicated = 0
    public var reordered = 0
    /// Datagrams dropped because the link blocks UDP (`LinkConditions.udp`), or lost to its UDP throttling.
    public var udpBlocked = 0
    public var udpThrottled = 0
    public init() {}
}

/// One direction of an impaired link, without I/O: decides for each packet whether it is lost,
/// duplicated, held back for reordering, and how long it travels.
///
/// The simulator and the real-socket proxy share it, so both apply exactly the same model.
/// Time is the time since the workload started (negative before), which is what blackout
/// windows refer to. Same seed, same sequence of calls → same decisions.
public struct ImpairedLink<Packet> {
    /// A packet leaving the link `after` the call that returned it.
    public struct Delivery {
        public var packet: Packet
        public var after: TimeAmount
    }

    private struct Held {
        var packet: Packet
        var overtakesLeft: Int
        var releaseAt: TimeAmount
    }

    public let conditions: LinkConditions
    public private(set) var statistics = LinkStatistics()
    private var random: SeededRandom
    private var inBadState = false
    private var held: [Held] = []

    public init(conditions: LinkConditions, random: SeededRandom) {
        self.conditions = conditions
        self.random = random
    }

    /// Whether a blackout window covers `elapsed`.
    public func isDown(at elapsed: TimeAmount) -> Bool {
        let ms = Double(elapsed.nanoseconds) / 1e6
        return conditions.blackouts.contains { ms >= $0.atMs && ms < $0.atMs + $0.forMs }
    }

    /// A datagram enters the link at `elapsed`: returns what leaves it and when (held packets
    /// that this one overtook included).
    public mutating func send(_ packet: Packet, at elapsed: TimeAmount) -> [Delivery] {
        guard let delay = travel(at: elapsed), passesUDPFilter(at: elapsed) else { return [] }
        var deliveries: [Delivery] = []
        if let reorder = conditions.reorder, reorder.depth > 0, random.chance(reorder.percent) {
            statistics.reordered += 1
            held.append(
                Held(
                    packet: packet, overtakesLeft: reorder.depth,
                    releaseAt: elapsed + .nanoseconds(Int64(reorder.maxHoldMs * 1e6))))
        } else {
            deliveries.append(Delivery(packet: packet, after: delay))
            deliveries += releaseOvertaken(after: delay + .microseconds(1))
        }
        if random.chance(conditions.duplicatePercent) {
            statistics.duplicated += 1
            deliveries.append(Delivery(packet: packet, after: oneWayDelay()))
        }
        return deliveries
    }

    /// A TCP segment enters the link at `elapsed`: its travel time, or nil if it is lost.
    /// Duplication and reordering do not apply (TCP discards copies and delivers in order).
    public mutating func segment(at elapsed: TimeAmount) -> TimeAmount? {
        travel(at: elapsed)
    }

    /// When a held packet must be released even if nothing overtakes it.
    public var nextRelease: TimeAmount? { held.map(\.releaseAt).min() }

    /// Releases held packets whose hold expired by `elapsed`.
    public mutating func releaseExpired(at elapsed: TimeAmount) -> [Delivery] {
        let expired = held.filter { $0.releaseAt <= elapsed }
        held.removeAll { $0.releaseAt <= elapsed }
        return expired.map { Delivery(packet: $0.packet, after: oneWayDelay()) }
    }

    /// Loss decision and travel time for one packet; nil if lost.
    private mutating func travel(at elapsed: TimeAmount) -> TimeAmount? {
        statistics.packets += 1
        if isDown(at: elapsed) {
            statistics.lostInBlackout += 1
            return nil
        }
        var lost = random.chance(conditions.lossPercent)
        if let burst = conditions.burst {
            inBadState = inBadState ? !random.chance(burst.leaveBadPercent) : random.chance(burst.enterBadPercent)
            lost = random.chance(inBadState ? burst.lossInBadPercent : burst.lossInGoodPercent) || lost
        }
        if lost {
            statistics.lost += 1
            return nil
        }
        return oneWayDelay()
    }

    /// Whether a datagram that survived the link's loss gets past its UDP filter. The throttle's
    /// random draw is made only on links that throttle, so other links keep their sequences.
    private mutating func passesUDPFilter(at elapsed: TimeAmount) -> Bool {
        guard let filter = conditions.udp else { return true }
        if filter.blocks(atMs: Double(elapsed.nanoseconds) / 1e6) {
            statistics.udpBlocked += 1
            return false
        }
        if filter.lossPercent > 0, random.chance(filter.lossPercent) {
            statistics.udpThrottled += 1
            return false
        }
        return true
    }

    private mutating func oneWayDelay() -> TimeAmount {
        let ms = conditions.delayMs + conditions.jitterMs * random.unit()
        return .nanoseconds(Int64(ms * 1e6))
    }

    /// Held packets that one more packet overtook; those overtaken `depth` times leave now.
    private mutating func releaseOvertaken(after delay: TimeAmount) -> [Delivery] {
        var deliveries: [Delivery] = []
        for index in held.indices { held[index].overtakesLeft -= 1 }
        held.removeAll { entry in
            guard entry.overtakesLeft <= 0 else { return false }
            deliveries.append(Delivery(packet: entry.packet, after: delay))
            return true
        }
        return deliveries
    }
}
