import Histogram
import NIOCore

/// Collects what happened in one run, in either mode, and turns it into a `ScenarioReport`.
///
/// Messages carry their per-conversation sequence number in their text (`MessageText`), so
/// the receiving side can count duplicates and reordering without any shared state.
public struct RunRecorder: Sendable {
    private struct Conversation: Hashable {
        var from: String
        var to: String
    }

    private struct ConversationLog {
        var seen: Set<Int> = []
        var highest = -1
    }

    public private(set) var sent = 0
    public private(set) var receipted = 0
    public private(set) var failed = 0
    public private(set) var connectionLost = 0
    public private(set) var delivered = 0
    public private(set) var duplicates = 0
    public private(set) var outOfOrder = 0
    private var conversations: [Conversation: ConversationLog] = [:]
    private var latencies = Histogram<UInt64>(highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .three)
    private var latencySumMicros: UInt64 = 0
    private var latencyMaxMicros: UInt64 = 0

    public init() {}

    /// A sender handed a message to its client.
    public mutating func messageSent() { sent += 1 }

    /// The sender's receipt arrived `latency` after the message was first transmitted.
    public mutating func receiptArrived(latency: TimeAmount) {
        receipted += 1
        let micros = UInt64(max(0, latency.nanoseconds / 1000))
        _ = latencies.record(micros)
        latencySumMicros += micros
        latencyMaxMicros = max(latencyMaxMicros, micros)
    }

    /// The sender was told the message failed (`connectionLost`: its connection dropped first).
    public mutating func messageFailed(connectionLost lost: Bool = false) {
        failed += 1
        if lost { connectionLost += 1 }
    }

    /// A receiving application was handed a message.
    public mutating func appReceived(from: String, to: String, text: String) {
        guard let sequence = MessageText.sequence(in: text) else { return }
        let key = Conversation(from: from, to: to)
        var log = conversations[key, default: ConversationLog()]
        if log.seen.contains(sequence) {
            duplicates += 1
        } else {
            delivered += 1
            log.seen.insert(sequence)
            if sequence < log.highest { outOfOrder += 1 }
            log.highest = max(log.highest, sequence)
        }
        conversations[key] = log
    }

    /// Messages neither receipted nor reported failed.
    public var unresolved: Int { sent - receipted - failed }

    /// The report for this run.
    public func report(
        scenario: Scenario, mode: LabMode, seed: UInt64, counters: SenderCounters, duration: TimeAmount
    ) -> ScenarioReport {
        var report = ScenarioReport(scenario: scenario.name, mode: mode, seed: seed)
        report.sent = sent
        report.delivered = delivered
        report.receipted = receipted
        report.failed = failed
        report.connectionLost = connectionLost
        report.unresolved = unresolved
        report.duplicates = duplicates
        report.outOfOrder = outOfOrder
        if receipted > 0 {
            func ms(_ micros: UInt64) -> Double { (Double(micros) / 1000 * 10).rounded() / 10 }
            report.latency = LatencySummary(
                p50: ms(latencies.valueAtPercentile(50)), p95: ms(latencies.valueAtPercentile(95)),
                p99: ms(latencies.valueAtPercentile(99)), max: ms(latencyMaxMicros),
                mean: ms(latencySumMicros / UInt64(receipted)))
        }
        report.datagramsSent = sent + counters.retransmits + counters.extraCopies
        report.datagramsPerMessage = sent == 0 ? 0 : (Double(report.datagramsSent) / Double(sent) * 1000).rounded() / 1000
        report.retransmits = counters.retransmits
        report.spuriousRetransmits = counters.spuriousRetransmits
        report.durationSeconds = (Double(duration.nanoseconds) / 1e9 * 100).rounded() / 100
        report.evaluate(against: scenario)
        return report
    }
}

/// The senders' retransmission counters, summed over all senders.
public struct SenderCounters: Equatable, Sendable {
    public var retransmits = 0
    public var spuriousRetransmits = 0
    /// Datagrams beyond one per transmission (retransmissions sent in several copies).
    public var extraCopies = 0
    public init(retransmits: Int = 0, spuriousRetransmits: Int = 0) {
        self.retransmits = retransmits
        self.spuriousRetransmits = spuriousRetransmits
    }
}

/// The text of workload messages: `#<sequence> ` then padding up to the payload size.
public enum MessageText {
    public static func make(sequence: Int, payloadBytes: Int) -> String {
        let header = "#\(sequence) "
        return header + String(repeating: "x", count: max(0, payloadBytes - header.utf8.count))
    }

    public static func sequence(in text: String) -> Int? {
        guard text.hasPrefix("#"), let end = text.firstIndex(of: " ") else { return nil }
        return Int(text[text.index(after: text.startIndex)..<end])
    }
}
