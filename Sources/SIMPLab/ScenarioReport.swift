import Foundation

/// How a scenario is run.
public enum LabMode: String, Codable, Sendable, CaseIterable {
    /// The reliability core over simulated links, in virtual time.
    case sim
    /// A real relay, Redis and clients, with impairment proxies on loopback.
    case real
}

/// Latency from a message's first transmission to its receipt at the sender, in milliseconds.
public struct LatencySummary: Codable, Equatable, Sendable {
    public var p50: Double
    public var p95: Double
    public var p99: Double
    public var max: Double
    public var mean: Double
}

/// Why a run stopped.
public enum RunEnd: String, Codable, Sendable {
    /// Every message was receipted or reported failed (and late duplicates were waited for).
    case settled
    /// The simulator reached its bound on virtual time (`--max-virtual-seconds`).
    case virtualTimeLimit = "virtual_time_limit"
    /// The run reached its bound on wall-clock time (`--max-wall-seconds`).
    case wallTimeLimit = "wall_time_limit"
    /// Virtual time stopped advancing: a million events in a row at one instant (something
    /// re-arms itself without delay), so the simulator gave up at once.
    case stalled
    /// Nothing was left to happen, yet some messages had no outcome.
    case idle

    /// A phrase for the table.
    public var explanation: String {
        switch self {
        case .settled: return "settled (every message has an outcome)"
        case .virtualTimeLimit: return "virtual-time limit reached"
        case .wallTimeLimit: return "wall-time limit reached"
        case .stalled: return "virtual time stalled (events looping at one instant)"
        case .idle: return "nothing left to happen"
        }
    }
}

/// One bar a run must meet, and how it did.
public struct Bar: Codable, Equatable, Sendable {
    public var name: String
    public var limit: Double
    public var value: Double
    public var passed: Bool
}

/// The outcome of one run of one scenario: the human table and `--json` show the same fields.
public struct ScenarioReport: Codable, Equatable, Sendable {
    public var scenario: String
    public var mode: LabMode
    public var seed: UInt64
    public var sent = 0
    /// Distinct messages handed to a receiving application.
    public var delivered = 0
    /// Messages whose receipt reached the sender.
    public var receipted = 0
    /// Messages reported failed to the sender (given up, refused, or connection lost).
    public var failed = 0
    /// Of `failed`: the sender's connection dropped before the outcome was known.
    public var connectionLost = 0
    /// Messages neither receipted nor reported failed when the run ended.
    public var unresolved = 0
    /// Messages that reached a receiving application and were also reported failed to their
    /// sender: never allowed.
    public var deliveredAndFailed = 0
    /// Content datagrams the relay refused for the per-user rate limit.
    public var rateLimited = 0
    /// Extra deliveries of a message to the application.
    public var duplicates = 0
    /// Deliveries of a message after a later one of the same conversation.
    public var outOfOrder = 0
    /// Deliveries of messages that travelled unencrypted: the lab's clients seal every message
    /// end to end (docs/E2E.md), so any is a bypass.
    public var unencrypted = 0
    /// Messages a receiving device could not decrypt.
    public var decryptionFailures = 0
    public var latency: LatencySummary?
    /// Content datagrams transmitted by senders (first sends and retransmissions).
    public var datagramsSent = 0
    public var datagramsPerMessage = 0.0
    public var retransmits = 0
    /// Retransmissions made needless by a receipt for an earlier transmission.
    public var spuriousRetransmits = 0
    /// Moves of the clients' datagrams between UDP and the control connection (all clients).
    public var pathSwitches = 0
    /// Virtual (sim) or wall-clock (real) length of the run.
    public var durationSeconds = 0.0
    /// Why the run stopped: settled, or a bound on virtual or wall time.
    public var ended = RunEnd.settled
    /// Seconds from the workload start to when the run stopped (virtual in sim mode), after
    /// the last outcome: with `ended`, how far a bounded run got.
    public var endedAtSeconds = 0.0
    /// Each receiving device, when the scenario declares `receiverDevices`.
    public var devices: [DeviceReport]?
    public var bars: [Bar] = []
    public var passed = true

    public init(scenario: String, mode: LabMode, seed: UInt64) {
        self.scenario = scenario
        self.mode = mode
        self.seed = seed
    }

    private enum CodingKeys: String, CodingKey {
        case scenario, mode, seed, sent, delivered, receipted, failed
        case connectionLost = "connection_lost", unresolved, duplicates, outOfOrder = "out_of_order"
        case deliveredAndFailed = "delivered_and_failed", rateLimited = "rate_limited"
        case unencrypted, decryptionFailures = "decryption_failures"
        case latency = "latency_ms", datagramsSent = "datagrams_sent", datagramsPerMessage = "datagrams_per_message"
        case retransmits, spuriousRetransmits = "spurious_retransmits", pathSwitches = "path_switches", durationSeconds = "duration_s", ended,
            endedAtSeconds = "ended_at_s", devices,
            bars, passed
    }

    /// Spurious retransmissions as a percentage of messages sent.
    public var spuriousRetransmitPercent: Double { sent == 0 ? 0 : Double(spuriousRetransmits) * 100 / Double(sent) }

    /// The bars that failed.
    public var failedBars: [Bar] { bars.filter { !$0.passed } }

    /// Checks the universal bars and the scenario's own.
    mutating func evaluate(against scenario: Scenario) {
        func atMost(_ name: String, _ value: Double, _ limit: Double) {
            bars.append(Bar(name: name, limit: limit, value: value, passed: value <= limit))
        }
        atMost("unresolved", Double(unresolved), 0)
        atMost("duplicates", Double(duplicates), 0)
        atMost("out_of_order", Double(outOfOrder), 0)
        atMost("delivered_and_failed", Double(deliveredAndFailed), 0)
        atMost("unencrypted", Double(unencrypted), 0)
        atMost("decryption_failures", Double(decryptionFailures), 0)
        atMost("not_settled", ended == .settled ? 0 : 1, 0)
        if scenario.expect.noFailures ?? (scenario.recoversAtMs <= 30_000) {
            atMost("failed", Double(failed), 0)
        }
        bars += (devices ?? []).flatMap(\.bars)
        let expect = scenario.expect
        if let limit = expect.maxMeanLatencyMs { atMost("latency_mean_ms", latency?.mean ?? .infinity, limit) }
        if let limit = expect.maxLatencyMs { atMost("latency_max_ms", latency?.max ?? .infinity, limit) }
        if let limit = expect.maxDatagramsPerMessage { atMost("datagrams_per_message", datagramsPerMessage, limit) }
        if let limit = expect.maxRateLimited { atMost("rate_limited", Double(rateLimited), limit) }
        if let limit = expect.maxSpuriousRetransmitPercent {
            atMost("spurious_retransmit_percent", (spuriousRetransmitPercent * 100).rounded() / 100, limit)
        }
        passed = bars.allSatisfy(\.passed)
    }

    /// The report as one JSON object.
    public func json(pretty: Bool = false) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.sortedKeys, .prettyPrinted] : [.sortedKeys]
        return String(decoding: try! encoder.encode(self), as: UTF8.self)
    }
}
