import Foundation

/// What `simp-bench abuse` measured, against the bars: the relay's RSS back within 20 % of its
/// baseline `settleSeconds` after each attack, Redis growing at most 50 MB per attack, and the
/// third user's logins within 2 s and sends' p99 within 500 ms during it.
public struct AbuseReport: Codable, Sendable {
    public var machine: MachineInfo
    public var durationSeconds: Double
    public var settleSeconds: Double
    public var rows: [Row]

    /// The bars.
    public static let rssReturnFraction = 0.2, redisGrowthMB = 50.0, slowestLoginSeconds = 2.0, sendP99Seconds = 0.5

    public struct Row: Codable, Sendable {
        public var attack: AbuseAttack
        /// Frames written (floods) or connections opened (idle).
        public var offered = 0
        public var rssBeforeMB = 0.0, rssDuringMB = 0.0, rssAfterMB = 0.0
        public var redisGrowthMB = 0.0
        /// Idle attack: when the relay had closed every connection (nil: not within 40 s).
        public var allClosedAfterSeconds: Double?
        /// Idle attack: how long the bench took to open its connections (all of them are in the
        /// relay's accept queue by then; the relay, not the bench, is what they wait for).
        public var openedInSeconds: Double?
        /// The relay's CPU seconds while the attack lasted (the probe's logins and sends included).
        public var relayCPUSeconds = 0.0
        public var probe = AbuseProbe.Figures()

        init(attack: AbuseAttack) { self.attack = attack }

        public var rssReturned: Bool { rssAfterMB <= rssBeforeMB * (1 + AbuseReport.rssReturnFraction) }
        public var meetsBars: Bool {
            rssReturned && redisGrowthMB <= AbuseReport.redisGrowthMB && probe.failures.isEmpty && !probe.logins.isEmpty
                && probe.slowestLogin <= AbuseReport.slowestLoginSeconds && probe.sendP99 <= AbuseReport.sendP99Seconds
        }
    }

    public func table() -> String {
        var lines = [
            "simp-bench abuse: \(Int(durationSeconds)) s per attack, RSS again \(Int(settleSeconds)) s after; \(machine.nproc) cores, \(machine.cpuModel)",
            Self.pad(["attack", "offered", "RSS before/peak/after MB", "Redis +MB", "logins (slowest s)", "send p50/p99 ms", "failures", "bars"]),
        ]
        for row in rows {
            let rss = String(format: "%.0f / %.0f / %.0f", row.rssBeforeMB, row.rssDuringMB, row.rssAfterMB)
            let sends = String(format: "%.0f / %.0f", row.probe.sendMedian * 1000, row.probe.sendP99 * 1000)
            let logins = String(format: "%d (%.2f)", row.probe.logins.count, row.probe.slowestLogin)
            lines.append(
                Self.pad([
                    row.attack.rawValue, String(row.offered), rss, String(format: "%.1f", row.redisGrowthMB), logins, sends,
                    String(row.probe.failures.count), row.meetsBars ? "met" : "MISSED",
                ]))
            if let opened = row.openedInSeconds {
                lines.append("  relay CPU during the attack: \(String(format: "%.2f", row.relayCPUSeconds)) s")
                lines.append(
                    "  \(row.offered) connections opened in \(String(format: "%.2f", opened)) s; the third user's first login took \(String(format: "%.2f", row.probe.logins.first ?? 0)) s"
                )
            }
            if let closed = row.allClosedAfterSeconds { lines.append("  every connection closed \(String(format: "%.1f", closed)) s after opening") }
            for failure in row.probe.failures.prefix(3) { lines.append("  failure: \(failure)") }
        }
        return lines.joined(separator: "\n")
    }

    public func json() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return (try? encoder.encode(self)).flatMap { String(data: $0, encoding: .utf8) } ?? "{}"
    }

    private static func pad(_ cells: [String]) -> String {
        let widths = [30, 8, 26, 10, 19, 16, 9, 6]
        return zip(cells, widths).map { $0.padding(toLength: max($1, $0.count), withPad: " ", startingAt: 0) }.joined(separator: " ")
    }
}
