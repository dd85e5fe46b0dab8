import Foundation
import NIOCore

/// The outcome of one file lab run: SIMP's transfer and the TCP model's on the same path, the
/// chat messages' latency during SIMP's transfer and without it, and the bars.
public struct FileLabReport: Codable, Sendable {
    public var scenario: String
    public var seed: UInt64
    public var fileBytes: Int
    public var bottleneck: Bottleneck
    /// Whether a link of the path loses packets (the goodput bar is then 2× TCP's, else 0.8×).
    public var lossy: Bool
    /// The path's mean round trip without a queue.
    public var roundTripMs: Double
    public var simp: TransferResult
    public var tcp: TransferResult
    /// The chat messages' send → arrival latencies without a file, in ms.
    public var chatAloneMs: [Double]
    /// Virtual time (`sim`, also when absent) or real processes and sockets (`real`).
    public var mode: LabMode?
    /// Real mode: why the TCP transfer did not run (the machine does not allow it), if so.
    public var tcpSkipped: String?
    /// Real mode: whether the file the receiver saved has the sent file's bytes.
    public var fileIntact: Bool?
    /// Real mode: the kernel TCP sender's congestion control.
    public var tcpCongestionControl: String?
    /// Real mode: why SIMP's transfer ended without the file (the sender's or receiver's error, or the time limit).
    public var simpFailure: String?

    init(
        scenario: String, seed: UInt64, fileBytes: Int, bottleneck: Bottleneck, lossy: Bool, roundTrip: TimeAmount, simp: TransferResult,
        tcp: TransferResult, chatAlone: [TimeAmount]
    ) {
        self.scenario = scenario
        self.seed = seed
        self.fileBytes = fileBytes
        self.bottleneck = bottleneck
        self.lossy = lossy
        self.roundTripMs = Double(roundTrip.nanoseconds) / 1e6
        self.simp = simp
        self.tcp = tcp
        self.chatAloneMs = chatAlone.map { Double($0.nanoseconds) / 1e6 }
        self.mode = .sim
    }

    /// SIMP's goodput over the TCP model's (infinite when TCP did not finish and SIMP did).
    public var goodputRatio: Double {
        guard tcp.goodput > 0 else { return simp.goodput > 0 ? .infinity : 0 }
        return simp.goodput / tcp.goodput
    }

    /// The goodput bar: 2× TCP's on a lossy path, 0.8× on a clean one.
    public var requiredRatio: Double { lossy ? 2 : 0.8 }

    /// The 99th percentile (nearest rank) of the chat latencies during the transfer, in ms.
    public var chatDuringP99: Double? { Self.p99(simp.chatLatencies.map { Double($0.nanoseconds) / 1e6 }) }
    /// The same without a file.
    public var chatAloneP99: Double? { Self.p99(chatAloneMs) }
    /// The chat bar: the usual p99 plus one round trip.
    public var chatLimitMs: Double? { chatAloneP99.map { $0 + roundTripMs } }

    /// SIMP's file arrived (whole, in real mode) and beat the bar; without a TCP row (skipped),
    /// only the arrival counts.
    public var goodputPassed: Bool {
        simp.completedAfter != nil && fileIntact != false && (tcpSkipped != nil || goodputRatio >= requiredRatio)
    }
    public var chatPassed: Bool {
        guard let during = chatDuringP99, let limit = chatLimitMs else { return simp.chatLatencies.isEmpty && simp.completedAfter != nil }
        return during <= limit
    }
    public var passed: Bool { goodputPassed && chatPassed }

    static func p99(_ values: [Double]) -> Double? {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, Int((Double(sorted.count) * 0.99).rounded(.up)) - 1)]
    }

    /// One line per run of `reports` under a header: the columns of `simp-lab files`.
    public static func table(_ reports: [FileLabReport]) -> String {
        let header = [
            "scenario", "seed", "MB", "SIMP MB/s", "TCP MB/s", "ratio", "bar", "SIMP s", "TCP s", "SIMP sent/B", "TCP sent/B",
            "chat p99", "alone p99", "limit", "result",
        ]
        let rows = reports.map { report -> [String] in
            func rate(_ result: TransferResult) -> String { result.completedAfter == nil ? "-" : String(format: "%.2f", result.goodput / 1e6) }
            let skipped = report.tcpSkipped != nil
            func time(_ result: TransferResult) -> String { result.seconds.map { String(format: "%.1f", $0) } ?? "unfinished" }
            func ms(_ value: Double?) -> String { value.map { String(format: "%.0f", $0) } ?? "-" }
            let result =
                (report.passed ? "PASS" : "FAIL" + (report.goodputPassed ? "" : " goodput") + (report.chatPassed ? "" : " chat"))
                + (report.fileIntact == false ? " (file damaged)" : "")
            return [
                report.scenario + (report.mode == .real ? " (real)" : ""), "\(report.seed)", String(format: "%.0f", Double(report.fileBytes) / 1e6),
                rate(report.simp), skipped ? "skipped" : rate(report.tcp), skipped ? "-" : String(format: "%.2f", report.goodputRatio),
                String(format: "≥%.1f", report.requiredRatio), time(report.simp), skipped ? "skipped" : time(report.tcp),
                String(format: "%.3f", report.simp.bytesSentPerByte), skipped ? "-" : String(format: "%.3f", report.tcp.bytesSentPerByte),
                ms(report.chatDuringP99), ms(report.chatAloneP99), ms(report.chatLimitMs), result,
            ]
        }
        let all = [header] + rows
        let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        return all.map { row in
            row.enumerated().map { column, cell in
                column == 0
                    ? cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
                    : String(repeating: " ", count: widths[column] - cell.count) + cell
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }
}
