import Foundation

/// What `simp-bench client` reports: CPU µs per message with and without end-to-end
/// encryption (the median round of each), as a table or one JSON object.
public struct ClientCostReport: Codable, Sendable {
    /// One mode's figures, in CPU microseconds per message.
    public struct Row: Codable, Sendable {
        public var endToEnd: Bool
        public var messages: Int
        /// The window's wall time (sending at the rate, then waiting for the last receipt).
        public var seconds: Double
        /// Alice's client thread: with `one-way`, the sender of every message.
        public var aliceMicroseconds: Double
        /// Bob's client thread: with `one-way`, the receiver of every message.
        public var bobMicroseconds: Double
        /// Both clients' threads: one message's cost at its sender plus at its receiver.
        public var clientsMicroseconds: Double
        /// The whole bench process (both clients and the bench's own tasks).
        public var processMicroseconds: Double
        /// The relay process, which forwards ciphertext without opening it (nil: the relay
        /// was not a process of its own).
        public var relayMicroseconds: Double?

        enum CodingKeys: String, CodingKey {
            case endToEnd = "end_to_end", messages, seconds, aliceMicroseconds = "alice_us", bobMicroseconds = "bob_us"
            case clientsMicroseconds = "clients_us", processMicroseconds = "process_us", relayMicroseconds = "relay_us"
        }

        init(endToEnd: Bool, messages: Int, seconds: Double, before: CPUReading, after: CPUReading) {
            let perMessage = { (from: Double, to: Double) in (to - from) * 1e6 / Double(messages) }
            self.endToEnd = endToEnd
            self.messages = messages
            self.seconds = seconds
            aliceMicroseconds = perMessage(before.alice, after.alice)
            bobMicroseconds = perMessage(before.bob, after.bob)
            clientsMicroseconds = aliceMicroseconds + bobMicroseconds
            processMicroseconds = perMessage(before.process, after.process)
            relayMicroseconds = before.relay.flatMap { from in after.relay.map { perMessage(from, $0) } }
        }

        /// The round whose clients' CPU per message is the median of `rounds` (at least one).
        static func median(of rounds: [Row]) -> Row {
            rounds.sorted { $0.clientsMicroseconds < $1.clientsMicroseconds }[rounds.count / 2]
        }
    }

    public var messages: Int
    public var rounds: Int
    public var rate: Double
    public var textLength: Int
    public var pattern: ClientCostBench.Pattern
    /// Whether the clients kept an outbox (`simp`'s do), in both modes.
    public var outbox: Bool
    public var machine: MachineInfo
    /// The 1-minute load average before and after the run.
    public var loadAverage: [Double]
    /// Plain, then end to end.
    public var rows: [Row]

    enum CodingKeys: String, CodingKey {
        case messages, rounds, rate, textLength = "text_length", pattern, outbox, machine, loadAverage = "load_average", rows
    }

    init(options: ClientCostBench.Options, machine: MachineInfo, loadAverage: [Double], rows: [Row]) {
        messages = options.messages
        rounds = options.rounds
        rate = options.rate
        textLength = options.textLength
        pattern = options.pattern
        outbox = options.outbox
        self.machine = machine
        self.loadAverage = loadAverage
        self.rows = rows
    }

    public func json() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: (try? encoder.encode(self)) ?? Data(), as: UTF8.self)
    }

    public func table() -> String {
        let (alice, bob) = pattern == .oneWay ? ("sender", "receiver") : ("alice", "bob")
        let header = ["", "\(alice) µs/msg", "\(bob) µs/msg", "both clients", "bench process", "relay µs/msg", "seconds"]
        let format = { (value: Double) in String(format: "%.1f", value) }
        var cells = rows.map { row in
            [
                row.endToEnd ? "end to end" : "plain", format(row.aliceMicroseconds), format(row.bobMicroseconds),
                format(row.clientsMicroseconds), format(row.processMicroseconds), row.relayMicroseconds.map(format) ?? "n/a",
                String(format: "%.2f", row.seconds),
            ]
        }
        if rows.count == 2 {
            let (plain, sealed) = (rows[0], rows[1])
            let ratio = { (a: Double?, b: Double?) in a.flatMap { a in b.map { String(format: "%.2f", $0 / a) } } ?? "n/a" }
            cells.append([
                "end to end ÷ plain", ratio(plain.aliceMicroseconds, sealed.aliceMicroseconds),
                ratio(plain.bobMicroseconds, sealed.bobMicroseconds), ratio(plain.clientsMicroseconds, sealed.clientsMicroseconds),
                ratio(plain.processMicroseconds, sealed.processMicroseconds), ratio(plain.relayMicroseconds, sealed.relayMicroseconds), "",
            ])
        }
        return
            ([
                "CPU per message in the reference client (SIMPClient), \(pattern.rawValue): \(messages) messages of \(textLength) characters "
                    + "at \(Int(rate))/s, median of \(rounds) rounds" + (outbox ? ", clients with an outbox" : ""),
                "machine: \(machine.nproc) × \(machine.cpuModel), load average \(loadAverage.map(format).joined(separator: " → "))",
            ] + ColumnTable.lines(header: header, rows: cells)).joined(separator: "\n")
    }
}

/// Text columns: the first left-aligned, the others right-aligned, two spaces apart.
enum ColumnTable {
    static func lines(header: [String], rows: [[String]]) -> [String] {
        let all = [header] + rows
        let widths = header.indices.map { column in all.map { $0[column].count }.max()! }
        return all.map { line in
            zip(line, widths).enumerated().map { column, cell in
                column == 0
                    ? cell.0.padding(toLength: cell.1, withPad: " ", startingAt: 0)
                    : String(repeating: " ", count: cell.1 - cell.0.count) + cell.0
            }.joined(separator: "  ")
        }
    }
}
