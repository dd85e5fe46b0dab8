import Foundation

/// What became of one message of a run: `simp-lab replay --messages FILE` writes one per line.
/// Times are milliseconds since the workload started (virtual time in sim mode).
public struct MessageRecord: Codable, Equatable, Sendable {
    /// How a message ended.
    public enum Fate: String, Codable, Sendable {
        /// The receipt reached the sender.
        case receipted
        /// The sender was told it failed (retransmissions exhausted, refused, discarded).
        case failed
        /// The sender's control connection dropped before the outcome was known.
        case connectionLost = "connection_lost"
        /// No outcome when the run ended.
        case unresolved

        /// Whether the sender was told the message did not arrive (failed, or connection lost).
        public var isFailure: Bool { self == .failed || self == .connectionLost }
    }

    /// The message id the sender's client gave it.
    public var id: UInt64
    public var from: String
    public var to: String
    /// When the sender handed it to its client.
    public var sentMs: Double
    /// When a receiving application first got it (nil if never).
    public var deliveredMs: Double?
    /// When each receiving device of its user first got it, by device name; nil unless the
    /// scenario declares `receiverDevices` and the message is to a receiver.
    public var devices: [String: Double]?
    /// When its receipt reached the sender (nil if never).
    public var receiptedMs: Double?
    /// When the sender was told it failed (nil unless it did).
    public var failedMs: Double?
    /// Send → receipt latency from the first transmission, as the sender measured it.
    public var latencyMs: Double?
    /// Transmissions the sender made (first send included), when the client says.
    public var attempts: Int?
    public var fate: Fate = .unresolved

    public init(id: UInt64, from: String, to: String, sentMs: Double) {
        self.id = id
        self.from = from
        self.to = to
        self.sentMs = sentMs
    }

    private enum CodingKeys: String, CodingKey {
        case id, from, to, sentMs = "sent", deliveredMs = "delivered", receiptedMs = "receipted", failedMs = "failed"
        case latencyMs = "latency", attempts, fate, devices
    }

    /// Every field, with `null` for what did not happen (so every line has the same keys).
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(from, forKey: .from)
        try c.encode(to, forKey: .to)
        try c.encode(sentMs, forKey: .sentMs)
        try c.encode(deliveredMs, forKey: .deliveredMs)
        try c.encode(receiptedMs, forKey: .receiptedMs)
        try c.encode(failedMs, forKey: .failedMs)
        try c.encode(latencyMs, forKey: .latencyMs)
        try c.encode(attempts, forKey: .attempts)
        try c.encode(fate, forKey: .fate)
        try c.encodeIfPresent(devices, forKey: .devices)
    }

    /// Records as JSON Lines: one object per line, keys in a fixed order.
    public static func jsonLines(_ records: [MessageRecord], scenario: String? = nil) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return records.map { record in
            var line = String(decoding: try! encoder.encode(record), as: UTF8.self)
            if let scenario {
                line = "{\"scenario\":" + String(decoding: try! encoder.encode(scenario), as: UTF8.self) + "," + line.dropFirst()
            }
            return line + "\n"
        }.joined()
    }
}

/// A number of events at a moment of a run.
public struct TimedCount: Codable, Equatable, Sendable {
    /// Milliseconds since the workload started.
    public var atMs: Double
    public var count: Int
}

/// A client's datagrams moved between UDP and its control connection (PROTOCOL §5.5).
public struct PathChange: Codable, Equatable, Sendable {
    /// Milliseconds since the workload started.
    public var atMs: Double
    /// To the control connection (UDP does not get through), or back to UDP.
    public var toControl: Bool
}

/// Everything one run produced: the report, each message's fate and the retransmissions over
/// time (what `--messages` and `--plot` draw on).
public struct LabRun: Sendable {
    public var scenario: Scenario
    public var report: ScenarioReport
    public var messages: [MessageRecord]
    public var retransmissions: [TimedCount]
    /// When clients' datagrams moved between UDP and the control connection, in time order.
    public var pathChanges: [PathChange] = []
    /// How finely `retransmissions` is timed, in ms: 0 when each one is recorded as it
    /// happens (sim), the sampling interval in real mode.
    public var timelineResolutionMs = 0.0
    /// Sim mode: a digest of every simulated device's end-to-end keys (identity, signed and
    /// one-time prekeys, as stored) when the run ended; nil in real mode. The clients' end-to-end
    /// randomness comes from the seed, so the same seed makes the same keys. (One draw does not:
    /// swift-crypto's ML-KEM encapsulation at a session start takes the system's randomness, so
    /// the ciphertexts themselves differ between two runs; their sizes, and so the report, do not.)
    public var endToEndDigest: UInt64?
}
