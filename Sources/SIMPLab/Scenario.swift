import Foundation
import NIOCore
import SIMPCore

/// One packet-loss scenario: the workload, the links between clients and the relay, scheduled
/// faults and the bars the outcome must meet. Read from JSON (see `docs/SCENARIOS.md`).
public struct Scenario: Codable, Equatable, Sendable {
    public var name: String
    public var description: String = ""
    /// Seed for every random decision; `simp-lab replay --seed` overrides it.
    public var seed: UInt64 = 1
    public var workload = Workload()
    /// Every client's access link (both directions) unless `senderLink`/`receiverLink` say otherwise.
    public var link = AccessLink()
    public var senderLink: AccessLink?
    public var receiverLink: AccessLink?
    /// The receiving devices of each receiver user (nil: one default device, always online).
    public var receiverDevices: [ReceiverDevice]?
    /// One-shot send-only sessions of each receiver user.
    public var sendOnlySessions: [SendOnlySession] = []
    public var faults: [Fault] = []
    public var expect = Expectations()
    /// Overrides of the client's retransmission defaults, for experiments.
    public var retransmit: RetransmitOverrides?

    public init(name: String) { self.name = name }

    /// The access link of senders and of receivers.
    public var senderAccess: AccessLink { senderLink ?? link }
    public var receiverAccess: AccessLink { receiverLink ?? link }

    /// The client retransmission policy for this scenario.
    public var policy: RetransmitPolicy { retransmit?.applied(to: RetransmitPolicy()) ?? RetransmitPolicy() }

    /// When every link is back and every fault is over, in ms after the workload starts.
    public var recoversAtMs: Double {
        let links = [senderAccess.up, senderAccess.down, receiverAccess.up, receiverAccess.down].map(\.recoversAtMs)
        let faultEnds = faults.map { $0.atMs + ($0.forMs ?? 0) }
        return (links + faultEnds + [0]).max()!
    }

    /// Loads a scenario file.
    public static func load(from url: URL) throws -> Scenario {
        let data: Data
        do { data = try Data(contentsOf: url) } catch {
            throw LabError("cannot read \(url.path): \(error.localizedDescription)")
        }
        do { return try JSONDecoder().decode(Scenario.self, from: data) } catch {
            throw LabError("\(url.relativePath): \(LabError.describe(error))")
        }
    }

    private enum CodingKeys: String, CodingKey, CaseIterable {
        case name, description, seed, workload, link, senderLink, receiverLink, receiverDevices, sendOnlySessions, faults, expect
        case retransmit
    }

    public init(from decoder: Decoder) throws {
        try decoder.rejectUnknownKeys(CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        description = try c.decodeIfPresent(String.self, forKey: .description) ?? ""
        seed = try c.decodeIfPresent(UInt64.self, forKey: .seed) ?? 1
        workload = try c.decodeIfPresent(Workload.self, forKey: .workload) ?? Workload()
        link = try c.decodeIfPresent(AccessLink.self, forKey: .link) ?? AccessLink()
        senderLink = try c.decodeIfPresent(AccessLink.self, forKey: .senderLink)
        receiverLink = try c.decodeIfPresent(AccessLink.self, forKey: .receiverLink)
        receiverDevices = try c.decodeIfPresent([ReceiverDevice].self, forKey: .receiverDevices)
        sendOnlySessions = try c.decodeIfPresent([SendOnlySession].self, forKey: .sendOnlySessions) ?? []
        faults = try c.decodeIfPresent([Fault].self, forKey: .faults) ?? []
        expect = try c.decodeIfPresent(Expectations.self, forKey: .expect) ?? Expectations()
        retransmit = try c.decodeIfPresent(RetransmitOverrides.self, forKey: .retransmit)
        try workload.validate()
        try validateDevices()
    }
}

/// Who sends what, how often.
public struct Workload: Codable, Equatable, Sendable {
    public var senders = 1
    public var receivers = 1
    /// Messages per sender; a sender addresses its receivers in turn.
    public var messages = 100
    /// Time between two messages of one sender (`ratePerSecond` is the alternative).
    public var intervalMs: Double?
    public var ratePerSecond: Double?
    /// Bytes of text per message (at least the sequence-number header).
    public var payloadBytes = 32

    public init() {}

    /// The interval between a sender's messages.
    public var interval: TimeAmount {
        let ms = intervalMs ?? ratePerSecond.map { 1000 / $0 } ?? 20
        return .nanoseconds(Int64(ms * 1e6))
    }

    func validate() throws {
        guard senders >= 1, receivers >= 1 else { throw LabError("workload needs at least one sender and one receiver") }
        guard messages >= 1 else { throw LabError("workload.messages must be at least 1") }
        if let intervalMs, intervalMs <= 0 { throw LabError("workload.intervalMs must be positive") }
        if let ratePerSecond, ratePerSecond <= 0 { throw LabError("workload.ratePerSecond must be positive") }
    }

    private enum CodingKeys: String, CodingKey, CaseIterable {
        case senders, receivers, messages, intervalMs, ratePerSecond, payloadBytes
    }

    public init(from decoder: Decoder) throws {
        try decoder.rejectUnknownKeys(CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        senders = try c.decode(.senders, in: 1...10_000, default: 1)
        receivers = try c.decode(.receivers, in: 1...10_000, default: 1)
        messages = try c.decode(.messages, in: 1...10_000_000, default: 100)
        intervalMs = try c.decodeIfPresent(.intervalMs, in: StrictDecoding.positive)
        ratePerSecond = try c.decodeIfPresent(.ratePerSecond, in: StrictDecoding.positive)
        payloadBytes = try c.decode(.payloadBytes, in: 0...60_000, default: 32)
        if intervalMs != nil, ratePerSecond != nil {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: decoder.codingPath + [CodingKeys.ratePerSecond],
                    debugDescription: "give intervalMs or ratePerSecond, not both"))
        }
    }
}

/// A client's link to the relay: `up` carries client → relay, `down` relay → client. In JSON
/// either `{"up": {...}, "down": {...}}` or one set of conditions used for both directions.
public struct AccessLink: Codable, Equatable, Sendable {
    public var up = LinkConditions()
    public var down = LinkConditions()

    public init(up: LinkConditions = LinkConditions(), down: LinkConditions = LinkConditions()) {
        self.up = up
        self.down = down
    }

    public init(both: LinkConditions) { self.init(up: both, down: both) }

    private enum CodingKeys: String, CodingKey, CaseIterable { case up, down }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        if c.contains(.up) || c.contains(.down) {
            try decoder.rejectUnknownKeys(CodingKeys.self)
            self.init(
                up: try c.decodeIfPresent(LinkConditions.self, forKey: .up) ?? LinkConditions(),
                down: try c.decodeIfPresent(LinkConditions.self, forKey: .down) ?? LinkConditions())
        } else {
            self.init(both: try LinkConditions(from: decoder))
        }
    }
}

/// A control-plane or address fault at a point of the run.
public struct Fault: Codable, Equatable, Sendable {
    public enum Kind: String, Codable, Sendable, CaseIterable {
        /// The target clients' TCP control connections are closed.
        case closeControl
        /// The relay stops (every connection drops) and starts again after `forMs`.
        case restartRelay
        /// Redis stops and starts again, empty, after `forMs`.
        case restartRedis
        /// The target clients' public UDP port changes (a NAT rebinding): datagrams sent to
        /// the old port are lost.
        case natRebind
        /// The relay stops for `forMs` (as under SIGSTOP): what is sent to it meanwhile waits
        /// and is handled when it goes on; its connections stay open.
        case pauseRelay
    }

    /// Which clients a client fault applies to.
    public enum Target: String, Codable, Sendable, CaseIterable { case senders, receivers, all }

    /// Milliseconds after the workload starts.
    public var atMs: Double
    public var kind: Kind
    /// Downtime for restarts (default 1000 ms).
    public var forMs: Double?
    public var target: Target?

    public init(atMs: Double, kind: Kind, forMs: Double? = nil, target: Target? = nil) {
        self.atMs = atMs
        self.kind = kind
        self.forMs = forMs
        self.target = target
    }

    /// The downtime of a restart.
    public var downtime: TimeAmount { .nanoseconds(Int64((forMs ?? 1000) * 1e6)) }
    public var at: TimeAmount { .nanoseconds(Int64(atMs * 1e6)) }

    private enum CodingKeys: String, CodingKey, CaseIterable { case atMs, kind, forMs, target }

    public init(from decoder: Decoder) throws {
        try decoder.rejectUnknownKeys(CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        atMs = try c.decodeRequired(.atMs, in: StrictDecoding.nonNegative)
        _ = try c.decode(String.self, forKey: .kind) // "missing" error if absent
        kind = try c.decodeChoice(Kind.self, forKey: .kind)!
        forMs = try c.decodeIfPresent(.forMs, in: StrictDecoding.nonNegative)
        target = try c.decodeChoice(Target.self, forKey: .target)
    }

    /// Whether the fault hits a client in the given role.
    public func applies(toSender isSender: Bool) -> Bool {
        switch target ?? .all {
        case .all: return true
        case .senders: return isSender
        case .receivers: return !isSender
        }
    }
}

/// Bars beyond the ones every scenario must meet (no duplicates, no reordering, every message
/// resolved).
public struct Expectations: Codable, Equatable, Sendable {
    public var maxMeanLatencyMs: Double?
    public var maxLatencyMs: Double?
    public var maxDatagramsPerMessage: Double?
    public var maxSpuriousRetransmitPercent: Double?
    /// No message may fail. Defaults to true when the scenario recovers within 30 s.
    public var noFailures: Bool?
    /// The most content datagrams the relay may refuse for the per-user rate limit.
    public var maxRateLimited: Double?

    public init() {}

    private enum CodingKeys: String, CodingKey, CaseIterable {
        case maxMeanLatencyMs, maxLatencyMs, maxDatagramsPerMessage, maxSpuriousRetransmitPercent, noFailures, maxRateLimited
    }

    public init(from decoder: Decoder) throws {
        try decoder.rejectUnknownKeys(CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        maxMeanLatencyMs = try c.decodeIfPresent(.maxMeanLatencyMs, in: StrictDecoding.nonNegative)
        maxLatencyMs = try c.decodeIfPresent(.maxLatencyMs, in: StrictDecoding.nonNegative)
        maxDatagramsPerMessage = try c.decodeIfPresent(.maxDatagramsPerMessage, in: StrictDecoding.nonNegative)
        maxSpuriousRetransmitPercent = try c.decodeIfPresent(.maxSpuriousRetransmitPercent, in: StrictDecoding.nonNegative)
        noFailures = try c.decodeIfPresent(Bool.self, forKey: .noFailures)
        maxRateLimited = try c.decodeIfPresent(.maxRateLimited, in: StrictDecoding.nonNegative)
    }
}

/// Retransmission settings a scenario may override (milliseconds where a time).
public struct RetransmitOverrides: Codable, Equatable, Sendable {
    public var initialRTOMs: Double?
    public var minimumRTOMs: Double?
    public var maximumRTOMs: Double?
    public var backoff: Double?
    public var maxAttempts: Int?
    public var fastRetransmitThreshold: Int?
    public var retransmissionCopies: Int?
    /// `RetransmitPolicy.giveUpAfter`, in ms.
    public var giveUpAfterMs: Double?

    public init(
        initialRTOMs: Double? = nil, minimumRTOMs: Double? = nil, maximumRTOMs: Double? = nil,
        backoff: Double? = nil, maxAttempts: Int? = nil, fastRetransmitThreshold: Int? = nil
    ) {
        self.initialRTOMs = initialRTOMs
        self.minimumRTOMs = minimumRTOMs
        self.maximumRTOMs = maximumRTOMs
        self.backoff = backoff
        self.maxAttempts = maxAttempts
        self.fastRetransmitThreshold = fastRetransmitThreshold
    }

    private enum CodingKeys: String, CodingKey, CaseIterable {
        case initialRTOMs, minimumRTOMs, maximumRTOMs, backoff, maxAttempts, fastRetransmitThreshold, retransmissionCopies
        case giveUpAfterMs
    }

    public init(from decoder: Decoder) throws {
        try decoder.rejectUnknownKeys(CodingKeys.self)
        let c = try decoder.container(keyedBy: CodingKeys.self)
        initialRTOMs = try c.decodeIfPresent(.initialRTOMs, in: StrictDecoding.positive)
        minimumRTOMs = try c.decodeIfPresent(.minimumRTOMs, in: StrictDecoding.positive)
        maximumRTOMs = try c.decodeIfPresent(.maximumRTOMs, in: StrictDecoding.positive)
        backoff = try c.decodeIfPresent(.backoff, in: 1...Double.infinity)
        maxAttempts = try c.decodeIfPresent(.maxAttempts, in: 1...1000)
        fastRetransmitThreshold = try c.decodeIfPresent(.fastRetransmitThreshold, in: 0...1000)
        retransmissionCopies = try c.decodeIfPresent(.retransmissionCopies, in: 1...10)
        giveUpAfterMs = try c.decodeIfPresent(.giveUpAfterMs, in: StrictDecoding.positive)
    }

    func applied(to policy: RetransmitPolicy) -> RetransmitPolicy {
        var policy = policy
        func ms(_ value: Double) -> TimeAmount { .nanoseconds(Int64(value * 1e6)) }
        if let initialRTOMs { policy.initialRTO = ms(initialRTOMs) }
        if let minimumRTOMs { policy.minimumRTO = ms(minimumRTOMs) }
        if let maximumRTOMs { policy.maximumRTO = ms(maximumRTOMs) }
        if let backoff { policy.backoff = backoff }
        if let maxAttempts { policy.maxAttempts = maxAttempts }
        if let fastRetransmitThreshold { policy.fastRetransmitThreshold = fastRetransmitThreshold }
        if let retransmissionCopies { policy.retransmissionCopies = retransmissionCopies }
        if let giveUpAfterMs { policy.giveUpAfter = ms(giveUpAfterMs) }
        return policy
    }
}

/// A one-line error for the user.
public struct LabError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }

    /// A readable account of a JSON decoding error.
    static func describe(_ error: Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        func path(_ context: DecodingError.Context) -> String {
            context.codingPath.reduce(into: "") { path, key in
                if let index = key.intValue { path += "[\(index)]" } else { path += (path.isEmpty ? "" : ".") + key.stringValue }
            }
        }
        switch error {
        case .keyNotFound(let key, let context): return "missing \"\(key.stringValue)\" at \(path(context).isEmpty ? "top level" : path(context))"
        case .typeMismatch(_, let context), .valueNotFound(_, let context): return "\(path(context)): \(context.debugDescription)"
        case .dataCorrupted(let context): return "\(path(context).isEmpty ? "JSON" : path(context)): \(context.debugDescription)"
        @unknown default: return "\(error)"
        }
    }
}
