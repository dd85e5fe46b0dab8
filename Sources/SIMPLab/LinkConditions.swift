/// How bad one direction of a network link is. Every field is optional in scenario JSON and
/// defaults to a perfect link; `docs/SCENARIOS.md` describes each one.
public struct LinkConditions: Codable, Equatable, Sendable {
    /// Independent random loss of each packet, in percent.
    public var lossPercent: Double = 0
    /// Bursty loss (Gilbert–Elliott), applied on top of `lossPercent`.
    public var burst: BurstLoss?
    /// Probability that a packet arrives twice, in percent (UDP only; TCP discards copies).
    public var duplicatePercent: Double = 0
    /// Probability and depth of reordering (UDP only; TCP delivers in order).
    public var reorder: Reordering?
    /// One-way delay: every packet takes `delayMs` plus a uniform random part in [0, `jitterMs`].
    public var delayMs: Double = 0
    public var jitterMs: Double = 0
    /// Windows in which the link drops everything, relative to the start of the workload.
    public var blackouts: [Blackout] = []
    /// What the network does to UDP alone (blocked, throttled) while TCP passes.
    public var udp: UDPFilter?

    public init() {}

    /// A network that blocks or throttles UDP and lets TCP through, as corporate, hotel and some
    /// mobile networks do: it applies to datagrams only, on top of the rest of the link.
    public struct UDPFilter: Codable, Equatable, Sendable {
        /// Every datagram is dropped, from before the clients connect.
        public var blocked = false
        /// Every datagram is dropped from this time on (ms after the workload starts).
        public var blockedAtMs: Double?
        /// Datagrams are lost with this probability, in percent, on top of `lossPercent`.
        public var lossPercent: Double = 0

        public init(blocked: Bool = false, blockedAtMs: Double? = nil, lossPercent: Double = 0) {
            self.blocked = blocked
            self.blockedAtMs = blockedAtMs
            self.lossPercent = lossPercent
        }

        /// Whether every datagram sent at `elapsedMs` (since the workload started) is dropped.
        public func blocks(atMs elapsedMs: Double) -> Bool {
            blocked || blockedAtMs.map { elapsedMs >= $0 } == true
        }
    }

    /// Gilbert–Elliott two-state loss: each packet first moves the chain (good → bad with
    /// `enterBadPercent`, bad → good with `leaveBadPercent`), then is lost with the loss of the
    /// state it is in.
    public struct BurstLoss: Codable, Equatable, Sendable {
        public var enterBadPercent: Double
        public var leaveBadPercent: Double
        public var lossInGoodPercent: Double = 0
        public var lossInBadPercent: Double = 100

        public init(enterBadPercent: Double, leaveBadPercent: Double, lossInGoodPercent: Double = 0, lossInBadPercent: Double = 100) {
            self.enterBadPercent = enterBadPercent
            self.leaveBadPercent = leaveBadPercent
            self.lossInGoodPercent = lossInGoodPercent
            self.lossInBadPercent = lossInBadPercent
        }
    }

    /// With probability `percent`, a packet is held back until `depth` later packets have
    /// overtaken it (or `maxHoldMs` passed, so the last packets of a quiet link still arrive).
    public struct Reordering: Codable, Equatable, Sendable {
        public var percent: Double
        public var depth: Int = 1
        public var maxHoldMs: Double = 100

        public init(percent: Double, depth: Int = 1, maxHoldMs: Double = 100) {
            self.percent = percent
            self.depth = depth
            self.maxHoldMs = maxHoldMs
        }
    }

    /// The link is down from `atMs` for `forMs`.
    public struct Blackout: Codable, Equatable, Sendable {
        public var atMs: Double
        public var forMs: Double

        public init(atMs: Double, forMs: Double) {
            self.atMs = atMs
            self.forMs = forMs
        }
    }

    /// When the link is up again for good after its last blackout (0 without blackouts), in ms.
    public var recoversAtMs: Double { blackouts.map { $0.atMs + $0.forMs }.max() ?? 0 }

    private enum CodingKeys: String, CodingKey, CaseIterable {
        case lossPercent, burst, duplicatePercent, reorder, delayMs, jitterMs, blackouts, udp
    }

    public init(from decoder: Decoder) throws {
        try decoder.rejectUnknownKeys(CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        lossPercent = try c.decode(.lossPercent, in: StrictDecoding.percent, default: 0)
        burst = try c.decodeIfPresent(BurstLoss.self, forKey: .burst)
        duplicatePercent = try c.decode(.duplicatePercent, in: StrictDecoding.percent, default: 0)
        reorder = try c.decodeIfPresent(Reordering.self, forKey: .reorder)
        delayMs = try c.decode(.delayMs, in: StrictDecoding.nonNegative, default: 0)
        jitterMs = try c.decode(.jitterMs, in: StrictDecoding.nonNegative, default: 0)
        blackouts = try c.decodeIfPresent([Blackout].self, forKey: .blackouts) ?? []
        udp = try c.decodeIfPresent(UDPFilter.self, forKey: .udp)
    }
}

extension LinkConditions.UDPFilter {
    private enum CodingKeys: String, CodingKey, CaseIterable { case blocked, blockedAtMs, lossPercent }

    public init(from decoder: Decoder) throws {
        try decoder.rejectUnknownKeys(CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        blocked = try c.decodeIfPresent(Bool.self, forKey: .blocked) ?? false
        blockedAtMs = try c.decodeIfPresent(.blockedAtMs, in: StrictDecoding.nonNegative)
        lossPercent = try c.decode(.lossPercent, in: StrictDecoding.percent, default: 0)
        if blocked, blockedAtMs != nil {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: decoder.codingPath + [CodingKeys.blockedAtMs],
                    debugDescription: "give blocked (from the start) or blockedAtMs (from then on), not both"))
        }
    }
}

extension LinkConditions.BurstLoss {
    private enum CodingKeys: String, CodingKey, CaseIterable { case enterBadPercent, leaveBadPercent, lossInGoodPercent, lossInBadPercent }

    public init(from decoder: Decoder) throws {
        try decoder.rejectUnknownKeys(CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        enterBadPercent = try c.decodeRequired(.enterBadPercent, in: StrictDecoding.percent)
        leaveBadPercent = try c.decodeRequired(.leaveBadPercent, in: StrictDecoding.percent)
        lossInGoodPercent = try c.decode(.lossInGoodPercent, in: StrictDecoding.percent, default: 0)
        lossInBadPercent = try c.decode(.lossInBadPercent, in: StrictDecoding.percent, default: 100)
    }
}

extension LinkConditions.Reordering {
    private enum CodingKeys: String, CodingKey, CaseIterable { case percent, depth, maxHoldMs }

    public init(from decoder: Decoder) throws {
        try decoder.rejectUnknownKeys(CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        percent = try c.decodeRequired(.percent, in: StrictDecoding.percent)
        depth = try c.decode(.depth, in: 1...1000, default: 1)
        maxHoldMs = try c.decode(.maxHoldMs, in: StrictDecoding.nonNegative, default: 100)
    }
}

extension LinkConditions.Blackout {
    private enum CodingKeys: String, CodingKey, CaseIterable { case atMs, forMs }

    public init(from decoder: Decoder) throws {
        try decoder.rejectUnknownKeys(CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        atMs = try c.decodeRequired(.atMs, in: StrictDecoding.nonNegative)
        forMs = try c.decodeRequired(.forMs, in: StrictDecoding.nonNegative)
    }
}
