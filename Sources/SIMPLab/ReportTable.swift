/// Text renderings of reports: a detailed table for one run, one row per run for a suite.
public enum ReportTable {
    /// The detailed table of one report.
    public static func detailed(_ report: ScenarioReport) -> String {
        var rows: [(String, String)] = [
            ("scenario", report.scenario), ("mode", report.mode.rawValue), ("seed", "\(report.seed)"),
            ("sent", "\(report.sent)"), ("delivered", "\(report.delivered)"), ("receipted", "\(report.receipted)"),
            ("failed", "\(report.failed)" + (report.connectionLost > 0 ? " (\(report.connectionLost) connection lost)" : "")),
            ("unresolved", "\(report.unresolved)"), ("duplicates", "\(report.duplicates)"),
            ("out_of_order", "\(report.outOfOrder)"), ("delivered_and_failed", "\(report.deliveredAndFailed)"),
            ("rate_limited", "\(report.rateLimited)"),
            ("unencrypted", "\(report.unencrypted)"), ("decryption_failures", "\(report.decryptionFailures)"),
        ]
        if let latency = report.latency {
            rows.append(
                (
                    "latency_ms",
                    "p50 \(ms(latency.p50))  p95 \(ms(latency.p95))  p99 \(ms(latency.p99))  max \(ms(latency.max))  mean \(ms(latency.mean))"
                ))
        } else {
            rows.append(("latency_ms", "-"))
        }
        rows += [
            ("datagrams_sent", "\(report.datagramsSent)"),
            ("datagrams_per_message", format3(report.datagramsPerMessage)),
            ("retransmits", "\(report.retransmits)"),
            ("spurious_retransmits", "\(report.spuriousRetransmits) (\(format2(report.spuriousRetransmitPercent))%)"),
            ("path_switches", "\(report.pathSwitches) (UDP <-> control connection, all clients)"),
            ("duration_s", format2(report.durationSeconds)),
            ("ended", report.ended.explanation + " at \(format2(report.endedAtSeconds)) s"),
        ]
        for device in report.devices ?? [] {
            rows.append(("device " + device.device, describe(device)))
        }
        for bar in report.bars {
            rows.append(("bar " + bar.name, "\(bar.passed ? "pass" : "FAIL")  \(number(bar.value)) ≤ \(number(bar.limit))"))
        }
        rows.append(("result", report.passed ? "PASS" : "FAIL"))
        let width = rows.map(\.0.count).max()!
        return rows.map { $0.0.padding(toLength: width + 2, withPad: " ", startingAt: 0) + $0.1 }.joined(separator: "\n")
    }

    /// Column headers of `summary(_:)`.
    public static let header = ["scenario", "seed", "sent", "dlvd", "fail", "dup", "ooo", "p50", "p99", "max", "dg/msg", "result"]

    /// One line per report, aligned in at most 100 columns (for a scenario name of up to 24
    /// characters), then a line for each run that failed a bar or had a count that must be 0
    /// but was not. The rest (mode, mean, spurious retransmissions, path switches, …) is in
    /// `--json` and the detailed table of one run.
    public static func summary(_ reports: [ScenarioReport]) -> String {
        let rows =
            [header]
            + reports.map { report -> [String] in
                let latency = report.latency
                return [
                    report.scenario, "\(report.seed)", "\(report.sent)", "\(report.delivered)", "\(report.failed)",
                    "\(report.duplicates)", "\(report.outOfOrder)",
                    latency.map { ms($0.p50) } ?? "-", latency.map { ms($0.p99) } ?? "-", latency.map { ms($0.max) } ?? "-",
                    format3(report.datagramsPerMessage), report.passed ? "PASS" : "FAIL",
                ]
            }
        let widths = header.indices.map { column in rows.map { $0[column].count }.max()! }
        let table = rows.map { row in
            row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }
        return (table + reports.compactMap(notes)).joined(separator: "\n")
    }

    /// What went wrong in a run, on one line (nil if nothing did).
    static func notes(_ report: ScenarioReport) -> String? {
        var notes = report.failedBars.map { "bar \($0.name) \(number($0.value)) > \(number($0.limit))" }
        if report.deliveredAndFailed > 0 { notes.append("\(report.deliveredAndFailed) delivered and failed") }
        if report.decryptionFailures > 0 { notes.append("\(report.decryptionFailures) undecrypted") }
        guard !notes.isEmpty else { return nil }
        return "\(report.scenario) (seed \(report.seed)): " + notes.joined(separator: "; ")
    }

    /// One device's counts on one line.
    static func describe(_ device: DeviceReport) -> String {
        var text = "expected \(device.expected)  delivered \(device.delivered)  dup \(device.duplicates)  ooo \(device.outOfOrder)"
        text += "  failed \(device.failed)  missing \(device.missing)  d&f \(device.deliveredAndFailed)"
        if let p50 = device.deliveryP50Ms, let max = device.deliveryMaxMs { text += "  delivery p50 \(ms(p50)) ms  max \(ms(max)) ms" }
        return text
    }

    private static func ms(_ value: Double) -> String { format1(value) }
    private static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : format2(value)
    }
    private static func format1(_ value: Double) -> String { fixed(value, 1) }
    private static func format2(_ value: Double) -> String { fixed(value, 2) }
    private static func format3(_ value: Double) -> String { fixed(value, 3) }

    /// `value` with exactly `digits` decimals.
    static func fixed(_ value: Double, _ digits: Int) -> String {
        guard value.isFinite else { return "\(value)" }
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let scaled = Int64((abs(value) * scale).rounded())
        let whole = scaled / Int64(scale)
        var fraction = String(scaled % Int64(scale))
        while fraction.count < digits { fraction = "0" + fraction }
        return (value < 0 && scaled != 0 ? "-" : "") + "\(whole)." + fraction
    }
}
