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
        subcommands: [Replay.self, List.self])
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
        discussion: "One file prints the detailed table; several files or --all print one summary row per scenario.")

    @Argument(help: "Scenario files to run.")
    var files: [String] = []

    @Flag(name: .long, help: "Run every scenario in --dir.")
    var all = false

    @OptionGroup var suite: SuiteOptions

    @Option(name: .long, help: "Seed for every random decision (default: the scenario's own).")
    var seed: UInt64?

    @Option(name: .long, help: "sim: the reliability core in virtual time (default). real: relay, Redis and clients on loopback sockets.")
    var mode: LabMode = Lab.defaultMode

    @Option(name: .long, help: "Override the number of messages per sender (e.g. for a quick real run).")
    var messages: Int?

    @Flag(name: .long, help: "Print the report as JSON: one object for one scenario, an array for several.")
    var json = false

    func validate() throws {
        if files.isEmpty && !all { throw ValidationError("name scenario files or pass --all") }
        if let messages, messages < 1 { throw ValidationError("--messages must be at least 1") }
    }

    func run() async throws {
        var scenarios: [Scenario] = []
        do {
            scenarios = try files.map { try Scenario.load(from: URL(fileURLWithPath: $0)) }
            if all { scenarios += try suite.suite().entries.map(\.scenario) }
        } catch let error as LabError {
            FileHandle.standardError.write(Data("simp-lab: \(error)\n".utf8))
            throw ExitCode(2)
        }
        var reports: [ScenarioReport] = []
        for var scenario in scenarios {
            if let messages { scenario.workload.messages = messages }
            do {
                reports.append(try await Lab.run(scenario, mode: mode, seed: seed))
            } catch {
                FileHandle.standardError.write(Data("simp-lab: \(scenario.name): \(error)\n".utf8))
                throw ExitCode(2)
            }
        }
        if json {
            print(reports.count == 1 ? reports[0].json() : "[" + reports.map { $0.json() }.joined(separator: ",") + "]")
        } else {
            print(reports.count == 1 ? ReportTable.detailed(reports[0]) : ReportTable.summary(reports))
        }
        if reports.contains(where: { !$0.passed }) { throw ExitCode(1) }
    }
}

extension LabMode: ExpressibleByArgument {}
