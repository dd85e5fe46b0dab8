import ArgumentParser
import Foundation
import SIMPCore
import SIMPLab

@main
struct SIMPLabCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simp-lab",
        abstract: "Replays packet-loss scenarios against SIMP's reliability and reports how delivery behaved.",
        discussion: """
            Scenario files are JSON (docs/SCENARIOS.md). `sim` mode runs the real reliability core over \
            simulated links in virtual time; `real` mode runs a relay, Redis and clients on loopback with \
            impairment proxies. Exit status: 0 if every bar passed, 1 if one failed, 2 on errors.
            """,
        version: SIMPVersion.current,
        subcommands: [Replay.self, List.self, Files.self])
}

struct SuiteOptions: ParsableArguments {
    @Option(name: .long, help: "Directory holding the scenario suite.")
    var dir = "scenarios"

    func suite() throws -> ScenarioSuite {
        try ScenarioSuite(directory: URL(fileURLWithPath: dir))
    }
}

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Lists the scenario suite, one line each.")

    @OptionGroup var suite: SuiteOptions

    func run() async throws {
        do {
            let entries = try suite.suite().entries
            let width = entries.map(\.scenario.name.count).max() ?? 0
            for entry in entries {
                print(entry.scenario.name.padding(toLength: width + 2, withPad: " ", startingAt: 0) + entry.scenario.description)
            }
        } catch let error as LabError {
            throw ValidationError(error.description)
        }
    }
}

struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Runs scenarios and prints a report table (or JSON).",
        discussion: """
            One file prints the detailed table; several files or --all print one summary row per scenario. \
            --plot draws the run as SVG (latency distribution, latency over time with blackouts and faults, \
            retransmissions over time); --messages writes each message's fate as JSON Lines. A simulated run \
            stops at --max-virtual-seconds or --max-wall-seconds, whichever comes first, and its report says \
            which (`ended`). A live progress line goes to stderr when it is a terminal.
            """)

    @Argument(help: "Scenarios to run: files, or names as `simp-lab list` shows them (found in --dir).")
    var files: [String] = []

    @Flag(name: .long, help: "Run every scenario in --dir.")
    var all = false

    @OptionGroup var suite: SuiteOptions

    @Option(
        name: [.long, .customLong("seeds")],
        help: ArgumentHelp(
            "Seed for every random decision (default: the scenario's own); a range (1..3 or 1-3) or a list (4,7) runs each scenario once per seed (--seeds is the same option).",
            valueName: "seeds"))
    var seed: SeedList?

    @Option(name: .long, help: "sim: the reliability core in virtual time (default). real: relay, Redis and clients on loopback sockets.")
    var mode: LabMode = Lab.defaultMode

    @Option(name: .long, help: "Override the number of messages per sender (e.g. for a quick real run).")
    var count: Int?

    @Flag(name: .long, help: "Print the report as JSON: one object for one scenario, an array for several.")
    var json = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Write an SVG picture of the run to this file; with several scenarios, a directory for one SVG per scenario plus summary.svg.",
            valueName: "path"))
    var plot: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Write every message (id, sent, delivered, receipted, attempts, fate; ms since the workload started) as JSON Lines to this file.",
            valueName: "file"))
    var messages: String?

    @Option(name: .long, help: "Sim mode: stop a run after this much virtual time (default: the workload plus 15 minutes).")
    var maxVirtualSeconds: Double?

    @Option(
        name: .long,
        help:
            "Stop a simulated run after this much wall-clock time (default 120); real mode: stop waiting for outcomes then (default: 120 s after the last send)."
    )
    var maxWallSeconds: Double?

    @Flag(name: .long, help: "No live progress line (it is only shown when stderr is a terminal).")
    var noProgress = false

    @Option(
        name: .customLong("udp-blocked"),
        help: ArgumentHelp(
            "Block UDP on these clients' links (sender, receiver or both): every datagram dropped, both ways; TCP passes.",
            discussion: "From the start (before the clients connect), or from --udp-blocked-at. Added to the scenario's own links.",
            valueName: "who"))
    var udpBlocked: LinkSide?

    @Option(
        name: .customLong("udp-blocked-at"),
        help: ArgumentHelp("With --udp-blocked: block from this many ms after the workload starts.", valueName: "ms"))
    var udpBlockedAt: Double?

    @Option(
        name: .customLong("udp-throttled"),
        help: ArgumentHelp(
            "Throttle UDP: lose this percentage of datagrams (e.g. 75) on the links of --udp-throttled-on, both ways; TCP passes.",
            valueName: "percent"))
    var udpThrottled: Double?

    @Option(
        name: .customLong("udp-throttled-on"),
        help: ArgumentHelp("Whose links --udp-throttled applies to: sender, receiver or both.", valueName: "who"))
    var udpThrottledOn: LinkSide = .both

    /// The command line's UDP settings.
    var udpOverride: UDPOverride {
        UDPOverride(
            blocked: udpBlocked, blockedAtMs: udpBlockedAt, throttled: udpThrottled == nil ? nil : udpThrottledOn,
            throttledPercent: udpThrottled ?? 0)
    }

    func validate() throws {
        if files.isEmpty && !all { throw ValidationError("name scenario files or pass --all") }
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
        if let messages, Int(messages) != nil {
            throw ValidationError("--messages names the JSON Lines file to write; use --count \(messages) to change the messages per sender")
        }
        // Check where the files go before a long run, not after it.
        let plotIsFile = files.count == 1 && !all && (seed?.seeds.count ?? 1) == 1 // otherwise a directory, created as needed
        for (flag, path) in [("--messages", messages), ("--plot", plotIsFile ? plot : nil)] {
            guard let path else { continue }
            let parent = URL(fileURLWithPath: path).deletingLastPathComponent().path
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: parent, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw ValidationError("\(flag) \(path): no such directory \(parent)")
            }
        }
        if let maxVirtualSeconds, !(maxVirtualSeconds > 0) { throw ValidationError("--max-virtual-seconds must be positive") }
        if let maxWallSeconds, !(maxWallSeconds > 0) { throw ValidationError("--max-wall-seconds must be positive") }
        if udpBlockedAt != nil, udpBlocked == nil { throw ValidationError("--udp-blocked-at needs --udp-blocked sender|receiver|both") }
        if let udpBlockedAt, !(udpBlockedAt >= 0) { throw ValidationError("--udp-blocked-at must not be negative") }
        if let udpThrottled, !(0...100).contains(udpThrottled) { throw ValidationError("--udp-throttled must be 0-100 (percent)") }
    }

    /// A scenario file, or (when no such file exists) the suite's scenario of that name.
    private func scenario(named name: String) throws -> Scenario {
        try ScenarioSuite.scenario(named: name, directory: URL(fileURLWithPath: suite.dir))
    }

    func run() async throws {
        var scenarios: [Scenario] = []
        do {
            scenarios = try files.map(scenario(named:))
            if all { scenarios += try suite.suite().entries.map(\.scenario) }
        } catch let error as LabError {
            fail("\(error)")
        }
        let progress = ProgressLine(enabled: !noProgress && isatty(STDERR_FILENO) != 0)
        var runs: [LabRun] = []
        let seeds: [UInt64?] = seed?.seeds ?? [nil]
        let jobs = scenarios.flatMap { scenario in seeds.map { (scenario, $0) } }
        for (index, (var scenario, seed)) in jobs.enumerated() {
            if let count { scenario.workload.messages = count }
            scenario = udpOverride.applied(to: scenario)
            var options = LabOptions()
            options.maxWallTime = maxWallSeconds.map { .nanoseconds(Int64($0 * 1e9)) }
            options.maxVirtualTime = maxVirtualSeconds.map { .nanoseconds(Int64($0 * 1e9)) }
            let prefix = jobs.count > 1 ? "[\(index + 1)/\(jobs.count)] " : ""
            if progress.enabled {
                options.progress = { @Sendable (state: LabProgress) in progress.show(prefix + state.line) }
            }
            do {
                runs.append(try await Lab.execute(scenario, mode: mode, seed: seed, options: options))
            } catch {
                progress.clear()
                fail("\(scenario.name): \(error)")
            }
            progress.clear()
        }
        let reports = runs.map(\.report)
        if json {
            print(reports.count == 1 ? reports[0].json() : "[" + reports.map { $0.json() }.joined(separator: ",") + "]")
        } else {
            print(reports.count == 1 ? ReportTable.detailed(reports[0]) : ReportTable.summary(reports))
        }
        do {
            try writeOutputs(runs)
        } catch {
            fail("\(error)")
        }
        if reports.contains(where: { !$0.passed }) { throw ExitCode(1) }
    }

    /// The --plot and --messages files.
    private func writeOutputs(_ runs: [LabRun]) throws {
        if let messages {
            let lines = runs.map { MessageRecord.jsonLines($0.messages, scenario: runs.count > 1 ? $0.report.scenario : nil) }.joined()
            try write(lines, to: URL(fileURLWithPath: messages))
        }
        guard let plot else { return }
        if runs.count == 1 {
            try write(LabPlot.run(runs[0]), to: URL(fileURLWithPath: plot))
            return
        }
        let directory = URL(fileURLWithPath: plot, isDirectory: true)
        do { try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true) } catch {
            throw ValidationError("cannot create directory \(plot): \(error.localizedDescription)")
        }
        for run in runs {
            let name = (seed?.seeds.count ?? 1) > 1 ? "\(run.report.scenario)-\(run.report.seed)" : run.report.scenario
            try write(LabPlot.run(run), to: directory.appendingPathComponent("\(name).svg"))
        }
        try write(LabPlot.summary(runs.map(\.report)), to: directory.appendingPathComponent("summary.svg"))
    }

    private func write(_ text: String, to url: URL) throws {
        do { try Data(text.utf8).write(to: url) } catch {
            throw ValidationError("cannot write \(url.relativePath): \(error.localizedDescription)")
        }
    }

    private func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("simp-lab: \(message)\n".utf8))
        Foundation.exit(2)
    }
}

/// The live progress line on stderr: rewritten in place, cleared when a run ends.
final class ProgressLine: Sendable {
    let enabled: Bool

    init(enabled: Bool) { self.enabled = enabled }

    func show(_ line: String) {
        guard enabled else { return }
        FileHandle.standardError.write(Data(("\r\u{1B}[2K" + String(line.prefix(100))).utf8))
    }

    func clear() {
        guard enabled else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8))
    }
}

extension LabMode: ExpressibleByArgument {}
extension LinkSide: ExpressibleByArgument {}

/// `--seed`: one seed, a range `A..B` (or `A-B`) or a list `A,B,C`.
struct SeedList: ExpressibleByArgument {
    let seeds: [UInt64]

    init?(argument: String) {
        if let range = argument.range(of: "..") ?? argument.range(of: "-") {
            guard let low = UInt64(argument[..<range.lowerBound]), let high = UInt64(argument[range.upperBound...]),
                low <= high, high - low < 10_000
            else { return nil }
            seeds = Array(low...high)
        } else {
            let parts = argument.split(separator: ",", omittingEmptySubsequences: false).map { UInt64($0) }
            guard !parts.isEmpty, !parts.contains(nil) else { return nil }
            seeds = parts.compactMap { $0 }
        }
    }
}
