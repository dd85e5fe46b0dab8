import Foundation

/// `scripts/bench-guard`'s verdict: instructions per message, counted by callgrind for the
/// workloads' phases, against a committed baseline.
public enum InstructionGuard {
    /// A count may grow by this share of its baseline before the guard fails.
    public static let tolerance = 0.10

    /// Instructions per message of each phase: a file of `name count` lines (`#` starts a comment).
    public typealias Counts = [String: Int]

    /// What callgrind wrote for each phase (`InstructionMarks.finish`): every dump file
    /// `<prefix>.<n>` whose description names a phase (`name/messages`), its instructions (`Ir`)
    /// divided by the phase's messages, rounded.
    public static func readDumps(prefix: String) throws -> Counts {
        let directory = URL(fileURLWithPath: prefix).deletingLastPathComponent()
        let base = URL(fileURLWithPath: prefix).lastPathComponent
        var counts: Counts = [:]
        for file in try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() where file.hasPrefix(base + ".") {
            let text = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            guard let (name, messages, total) = try phase(inDump: text, file: file) else { continue }
            counts[name] = Int((Double(total) / Double(messages)).rounded())
        }
        return counts
    }

    /// The phase a dump was written for and its total instructions; nil for a dump of no phase
    /// (the one callgrind writes at exit).
    public static func phase(inDump text: String, file: String) throws -> (name: String, messages: Int, total: Int)? {
        let trigger = "desc: Trigger: Client Request: "
        guard let description = text.split(separator: "\n").first(where: { $0.hasPrefix(trigger) })?.dropFirst(trigger.count) else { return nil }
        let parts = description.split(separator: "/")
        guard parts.count == 2, let messages = Int(parts[1]), messages > 0 else { return nil }
        let totals = text.split(separator: "\n").first { $0.hasPrefix("totals:") || $0.hasPrefix("summary:") }
        guard let total = totals?.split(separator: " ").last.flatMap({ Int($0) }) else {
            throw WorkloadError("\(file): no instruction total for \(description)")
        }
        return (String(parts[0]), messages, total)
    }

    /// A baseline file's counts.
    public static func parseBaseline(_ text: String) throws -> Counts {
        var counts: Counts = [:]
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let content = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let fields = content.split(separator: " ")
            guard !fields.isEmpty else { continue }
            guard fields.count == 2, let count = Int(fields[1]), count > 0 else {
                throw WorkloadError("baseline line \(number + 1): expected \"name count\", got \"\(line)\"")
            }
            counts[String(fields[0])] = count
        }
        return counts
    }

    /// A baseline file for `counts`, under `header` (comment lines).
    public static func baselineText(_ counts: Counts, header: [String]) -> String {
        let lines = header.map { "# " + $0 } + counts.keys.sorted().map { "\($0) \(counts[$0]!)" }
        return lines.joined(separator: "\n") + "\n"
    }

    /// How one phase compares with its baseline.
    public enum Verdict: Equatable, Sendable {
        case within
        /// Grew by more than the tolerance: the guard fails.
        case grew
        /// Dropped by more than the tolerance: fine, but the baseline should follow.
        case dropped
        /// Measured, not in the baseline; or in the baseline, not measured. Both fail: the
        /// baseline must name exactly what is measured.
        case new, missing
    }

    public struct Line: Equatable, Sendable {
        public var name: String
        public var baseline: Int?
        public var measured: Int?
        public var verdict: Verdict
        /// measured ÷ baseline − 1.
        public var change: Double? {
            guard let baseline, let measured else { return nil }
            return Double(measured) / Double(baseline) - 1
        }
    }

    /// Every phase of `measured` and `baseline`, by name.
    public static func compare(measured: Counts, baseline: Counts, tolerance: Double = tolerance) -> [Line] {
        Set(measured.keys).union(baseline.keys).sorted().map { name in
            switch (baseline[name], measured[name]) {
            case (nil, let count): return Line(name: name, baseline: nil, measured: count, verdict: .new)
            case (let count, nil): return Line(name: name, baseline: count, measured: nil, verdict: .missing)
            case (let old?, let new?):
                let ratio = Double(new) / Double(old)
                let verdict: Verdict = ratio > 1 + tolerance ? .grew : ratio < 1 - tolerance ? .dropped : .within
                return Line(name: name, baseline: old, measured: new, verdict: verdict)
            }
        }
    }

    /// Whether the guard passes: nothing grew, nothing new or missing.
    public static func passes(_ lines: [Line]) -> Bool {
        lines.allSatisfy { $0.verdict == .within || $0.verdict == .dropped }
    }

    /// The table and what to do about each line out of bounds.
    public static func report(_ lines: [Line], baselineFile: String, tolerance: Double = tolerance) -> String {
        let percent = Int((tolerance * 100).rounded())
        var text = "instructions per message (callgrind Ir)\n"
        text +=
            pad("phase", 24) + pad("baseline", 12, right: true) + pad("measured", 12, right: true) + pad("change", 10, right: true) + "  verdict\n"
        for line in lines {
            let change = line.change.map { String(format: "%+.1f %%", $0 * 100) } ?? "-"
            let verdict: String
            switch line.verdict {
            case .within: verdict = "ok"
            case .grew: verdict = "GREW by more than \(percent) %"
            case .dropped: verdict = "dropped by more than \(percent) %"
            case .new: verdict = "NOT IN THE BASELINE"
            case .missing: verdict = "NOT MEASURED"
            }
            text +=
                pad(line.name, 24) + pad(line.baseline.map(String.init) ?? "-", 12, right: true)
                + pad(line.measured.map(String.init) ?? "-", 12, right: true) + pad(change, 10, right: true) + "  " + verdict + "\n"
        }
        let grew = lines.filter { $0.verdict == .grew }.map(\.name)
        if !grew.isEmpty {
            text += """
                FAIL: \(grew.joined(separator: ", ")) grew by more than \(percent) % over \(baselineFile). If the cost is \
                intended, run scripts/bench-guard --update and commit the new baseline with the change, saying why.

                """
        }
        if lines.contains(where: { $0.verdict == .new || $0.verdict == .missing }) {
            text += "FAIL: the baseline and the workloads name different phases: run scripts/bench-guard --update and commit \(baselineFile).\n"
        }
        let dropped = lines.filter { $0.verdict == .dropped }.map(\.name)
        if !dropped.isEmpty {
            text += """
                NOTE: \(dropped.joined(separator: ", ")) dropped by more than \(percent) %: if that is expected, run \
                scripts/bench-guard --update and commit \(baselineFile), so that the guard holds the new figure.

                """
        }
        return text
    }

    private static func pad(_ text: String, _ width: Int, right: Bool = false) -> String {
        let space = String(repeating: " ", count: max(0, width - text.count))
        return right ? space + text : text + space
    }
}
