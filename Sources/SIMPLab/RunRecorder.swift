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

    /// What one receiving device saw of one conversation.
    private struct DeviceLog {
        var seen: Set<Int> = []
        var highest = -1
    }

    private struct DeviceKey: Hashable {
        var conversation: Conversation
        var device: String
    }

    public private(set) var sent = 0
    public private(set) var receipted = 0
    public private(set) var failed = 0
    public private(set) var connectionLost = 0
    public private(set) var delivered = 0
    public private(set) var duplicates = 0
    public private(set) var outOfOrder = 0
    /// Messages handed to a receiving application that travelled unencrypted (end to end bypassed).
    public private(set) var unencrypted = 0
    /// Messages a receiving device could not decrypt (the user would be told).
    public private(set) var decryptionFailures = 0
    /// Message ids by sequence number, per conversation, to tie a delivery to its message.
    private var ids: [Conversation: [Int: UInt64]] = [:]
    /// Sequence numbers delivered to any device, per conversation.
    private var deliveredAnywhere: [Conversation: Set<Int>] = [:]
    private var deviceLogs: [DeviceKey: DeviceLog] = [:]
    /// The receiving devices followed one by one, per user (`trackDevices`).
    private var trackedDevices: [String: [String]] = [:]
    /// Delivery counts per tracked device name, summed over its users.
    private var deviceCounts: [String: DeviceCounts] = [:]
    /// Deliveries to tracked devices still due: one per device of each message to its user,
    /// less those that happened and those of messages reported failed.
    public private(set) var deviceDeliveriesDue = 0
    private var latencies = Histogram<UInt64>(highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .three)
    private var latencySumMicros: UInt64 = 0
    private var latencyMaxMicros: UInt64 = 0
    /// What became of each message, in the order they were sent.
    public private(set) var messages: [MessageRecord] = []
    private var recordIndex: [UInt64: Int] = [:]
    /// Retransmissions over time (ms since the workload start, how many).
    public private(set) var retransmissions: [TimedCount] = []
    /// Moves of clients' datagrams between UDP and the control connection, as they were seen.
    public private(set) var pathChanges: [PathChange] = []

    public init() {}

    /// Follows each of `devices` of `user` on its own: per-device counts, and every message to
    /// `user` is due once at each of them.
    public mutating func trackDevices(_ devices: [String], of user: String) {
        trackedDevices[user] = devices
        for device in devices where deviceCounts[device] == nil { deviceCounts[device] = DeviceCounts() }
    }

    /// A sender handed message `id` with `text` for `to` to its client, `at` after the workload started.
    public mutating func messageSent(id: UInt64, from: String, to: String, text: String, at time: TimeAmount) {
        sent += 1
        recordIndex[id] = messages.count
        var record = MessageRecord(id: id, from: from, to: to, sentMs: Self.ms(time))
        if let devices = trackedDevices[to] {
            record.devices = [:]
            deviceDeliveriesDue += devices.count
        }
        messages.append(record)
        if let sequence = MessageText.sequence(in: text) { ids[Conversation(from: from, to: to), default: [:]][sequence] = id }
    }

    /// The sender's receipt for `id` arrived `latency` after the message was first transmitted.
    public mutating func receiptArrived(id: UInt64, latency: TimeAmount, attempts: Int?, at time: TimeAmount) {
        guard let index = recordIndex[id], messages[index].fate == .unresolved else { return }
        receipted += 1
        let micros = UInt64(max(0, latency.nanoseconds / 1000))
        _ = latencies.record(micros)
        latencySumMicros += micros
        latencyMaxMicros = max(latencyMaxMicros, micros)
        messages[index].fate = .receipted
        messages[index].receiptedMs = Self.ms(time)
        messages[index].latencyMs = Self.ms(latency)
        messages[index].attempts = attempts
    }

    /// The sender was told message `id` failed (`connectionLost`: its connection dropped first).
    public mutating func messageFailed(id: UInt64, connectionLost lost: Bool = false, attempts: Int? = nil, at time: TimeAmount) {
        guard let index = recordIndex[id], messages[index].fate == .unresolved else { return }
        failed += 1
        if lost { connectionLost += 1 }
        if let devices = messages[index].devices { deviceDeliveriesDue -= trackedDevices[messages[index].to]!.count - devices.count }
        messages[index].fate = lost ? .connectionLost : .failed
        messages[index].failedMs = Self.ms(time)
        messages[index].attempts = attempts
    }

    /// A receiving application was handed a message that travelled sealed end to end, or not.
    public mutating func handedOver(endToEnd: Bool) { if !endToEnd { unencrypted += 1 } }

    /// A receiving device could not decrypt a message.
    public mutating func decryptionFailed() { decryptionFailures += 1 }

    /// The application of `to`'s `device` was handed a message.
    public mutating func appReceived(from: String, to: String, device: String = "", text: String, at time: TimeAmount) {
        guard let sequence = MessageText.sequence(in: text) else { return }
        let conversation = Conversation(from: from, to: to)
        let key = DeviceKey(conversation: conversation, device: device)
        var log = deviceLogs[key, default: DeviceLog()]
        let tracked = trackedDevices[to]?.contains(device) ?? false
        if log.seen.contains(sequence) {
            duplicates += 1
            if tracked { deviceCounts[device]!.duplicates += 1 }
        } else {
            log.seen.insert(sequence)
            let late = sequence < log.highest
            if late { outOfOrder += 1 }
            log.highest = max(log.highest, sequence)
            if tracked {
                deviceCounts[device]!.delivered += 1
                if late { deviceCounts[device]!.outOfOrder += 1 }
            }
            if deliveredAnywhere[conversation, default: []].insert(sequence).inserted { delivered += 1 }
            if let id = ids[conversation]?[sequence], let index = recordIndex[id] {
                let at = Self.ms(time)
                if messages[index].deliveredMs == nil { messages[index].deliveredMs = at }
                if tracked, messages[index].devices != nil {
                    messages[index].devices![device] = at
                    if !messages[index].fate.isFailure { deviceDeliveriesDue -= 1 }
                }
            }
        }
        deviceLogs[key] = log
    }

    /// `count` retransmissions happened at `time`.
    public mutating func retransmitted(_ count: Int = 1, at time: TimeAmount) {
        guard count > 0 else { return }
        retransmissions.append(TimedCount(atMs: Self.ms(time), count: count))
    }

    /// A client's datagrams moved to the control connection (`toControl`) or back to UDP at `time`.
    public mutating func pathChanged(toControl: Bool, at time: TimeAmount) {
        pathChanges.append(PathChange(atMs: Self.ms(time), toControl: toControl))
    }

    /// Whether message `id` has its outcome (receipted or failed).
    public func isResolved(_ id: UInt64) -> Bool { recordIndex[id].map { messages[$0].fate != .unresolved } ?? false }

    /// Messages sent but not yet receipted or failed.
    public var inFlight: Int { unresolved }

    private static func ms(_ time: TimeAmount) -> Double { (Double(time.nanoseconds) / 1e5).rounded() / 10 }

    /// Messages neither receipted nor reported failed.
    public var unresolved: Int { sent - receipted - failed }

    /// The report for this run.
    public func report(
        scenario: Scenario, mode: LabMode, seed: UInt64, counters: SenderCounters, duration: TimeAmount, ended: RunEnd = .settled,
        endedAt: TimeAmount? = nil
    ) -> ScenarioReport {
        var report = ScenarioReport(scenario: scenario.name, mode: mode, seed: seed)
        report.ended = ended
        report.sent = sent
        report.delivered = delivered
        report.receipted = receipted
        report.failed = failed
        report.connectionLost = connectionLost
        report.unresolved = unresolved
        report.duplicates = duplicates
        report.outOfOrder = outOfOrder
        report.unencrypted = unencrypted
        report.decryptionFailures = decryptionFailures
        report.deliveredAndFailed = messages.filter { $0.deliveredMs != nil && $0.fate.isFailure }.count
        report.rateLimited = counters.rateLimited
        if let devices = trackedDevices.values.first {
            report.devices = DeviceReport.reports(
                devices: devices, trackedUsers: Set(trackedDevices.keys), counts: deviceCounts,
                messages: messages)
        }
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
        report.pathSwitches = counters.pathSwitches
        report.durationSeconds = (Double(duration.nanoseconds) / 1e9 * 100).rounded() / 100
        report.endedAtSeconds = (Double((endedAt ?? duration).nanoseconds) / 1e9 * 100).rounded() / 100
        report.evaluate(against: scenario)
        return report
    }

    /// The run's report with its per-message records and retransmission timeline.
    public func run(
        scenario: Scenario, mode: LabMode, seed: UInt64, counters: SenderCounters, duration: TimeAmount, ended: RunEnd,
        endedAt: TimeAmount
    ) -> LabRun {
        let report = report(
            scenario: scenario, mode: mode, seed: seed, counters: counters, duration: duration, ended: ended,
            endedAt: endedAt)
        var run = LabRun(scenario: scenario, report: report, messages: messages, retransmissions: retransmissions)
        run.pathChanges = pathChanges.sorted { $0.atMs < $1.atMs }
        return run
    }
}

/// The senders' retransmission counters, summed over all senders.
public struct SenderCounters: Equatable, Sendable {
    public var retransmits = 0
    public var spuriousRetransmits = 0
    /// Datagrams beyond one per transmission (retransmissions sent in several copies).
    public var extraCopies = 0
    /// Content datagrams the relay refused for the per-user rate limit.
    public var rateLimited = 0
    /// Every client's datagram path moves, to the control connection and back (docs/PROTOCOL.md
    /// §5.5), senders and receivers alike: how often the switching rule switched (flapping).
    public var pathSwitches = 0
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
