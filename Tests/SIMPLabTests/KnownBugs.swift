import SIMPLab
import XCTest

/// Bars that scenarios of the suite fail today because of bugs outside the lab, each with its
/// cause. A test lets exactly these fail and asserts every other bar; a `strict` entry must
/// still fail (when it passes, the bug is fixed: remove the entry), a lenient one fails only
/// on some seeds. Reproduce with `simp-lab replay scenarios/<name>.json --seed N [--mode real]`.
enum KnownBugs {
    struct Entry {
        var bars: Set<String>
        var strict: Bool
        var cause: String
        /// The modes it shows in.
        var modes: Set<LabMode> = [.sim, .real]
    }

    /// Seen once in real mode (`oneshot-send-mid-offline`, seed 1, under a loaded machine): one
    /// message reached the laptop twice, before its process stopped and again after the new one
    /// started; not reproduced in 10 later runs. Likely a retransmission that reached the relay after
    /// the device's session ended was stored and delivered to the new process, which has no memory
    /// of what the old one delivered (unconfirmed). A cause of that shape is fixed since: a
    /// closing client took messages until its datagram socket closed, and their receipts followed
    /// its DISCONNECT (now it stops taking them first, PROTOCOL §4.5); not yet shown to be the one.
    static let redeliveredAfterRestart = Entry(
        bars: ["duplicates", "laptop.duplicates"], strict: false,
        cause: "a message delivered before a device's stop delivered again to its next process (real mode, rare)", modes: [.real])

    /// The known bugs of each scenario.
    static let byScenario: [String: [Entry]] = [
        "device-offline-back": [redeliveredAfterRestart],
        "oneshot-send-mid-offline": [redeliveredAfterRestart],
    ]

    /// Fails for every failed bar of `report` that no known bug explains, and for a strict
    /// known bug whose bars all pass.
    static func assertBars(_ report: ScenarioReport, file: StaticString = #filePath, line: UInt = #line) {
        let known = (byScenario[report.scenario] ?? []).filter { $0.modes.contains(report.mode) }
        let allowed = known.reduce(into: Set<String>()) { $0.formUnion($1.bars) }
        let context = "\(report.scenario) \(report.mode.rawValue) seed \(report.seed)"
        for bar in report.failedBars where !allowed.contains(bar.name) {
            XCTFail("\(context): \(bar.name) = \(bar.value), limit \(bar.limit)", file: file, line: line)
        }
        let failed = Set(report.failedBars.map(\.name))
        for entry in known where entry.strict && failed.isDisjoint(with: entry.bars) {
            XCTFail("\(context): known bug no longer shows (\(entry.cause)); remove it from KnownBugs", file: file, line: line)
        }
    }
}
