import ArgumentParser
import Foundation
import SIMPLab

struct Files: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sends a file over each scenario's links in virtual time, SIMP beside the TCP model, and prints the comparison.",
        discussion: """
            The scenario's sender link and receiver link, with a bottleneck (--megabits, --buffer-ms) in front of them \
            towards the receiver. SIMP's transfer runs the real file sender and receiver with chat messages beside it \
            (one every --chat-interval-ms); the TCP model sends the same file over one connection (CUBIC, SACK, RACK). \
            Columns: goodput of each (file MB per second), their ratio and its bar (2× on a lossy path, 0.8× on a clean \
            one), completion time, file bytes sent per byte delivered, the chat messages' p99 send → arrival latency \
            during the transfer, without it, and its bar (that p99 plus one round trip). Exit status: 0 if every bar \
            passed, 1 if one failed, 2 on errors. docs/SCENARIOS.md ("File transfers") describes the model.
            """)

    @Argument(help: "Scenarios whose links to use: files, or names as `simp-lab list` shows them (found in --dir).")
    var scenarios: [String]

    @OptionGroup var suite: SuiteOptions

    @Option(name: [.long, .customLong("seeds")], help: "Seed, a range (1-8) or a list (1,4).")
    var seed: SeedList = SeedList(argument: "1")!

    @Option(name: .long, help: "The file's size in MB (10⁶ bytes); fractions allowed.")
    var sizeMb: Double = 10

    @Option(name: .long, help: "The bottleneck's rate towards the receiver, in Mbit/s.")
    var megabits: Double = 20

    @Option(name: .long, help: "The bottleneck's drop-tail queue, in ms of its rate.")
    var bufferMs: Double = 100

    @Option(name: .long, help: "One chat message every this many ms during SIMP's transfer.")
    var chatIntervalMs: Double = 20

    @Flag(name: .long, help: "Print the reports as a JSON array.")
    var json = false

    @Option(name: .long, help: ArgumentHelp("Write one SVG of transfer progress against time per run into this directory.", valueName: "dir"))
    var plot: String?

    func validate() throws {
        if !(sizeMb > 0) { throw ValidationError("--size-mb must be positive") }
        if !(megabits > 0) { throw ValidationError("--megabits must be positive") }
        if !(bufferMs >= 0) { throw ValidationError("--buffer-ms must not be negative") }
        if !(chatIntervalMs > 0) { throw ValidationError("--chat-interval-ms must be positive") }
    }

    func run() async throws {
        let setup = FileLab.Setup(
            fileBytes: Int(sizeMb * 1e6), bottleneck: Bottleneck(megabitsPerSecond: megabits, bufferMs: bufferMs),
            chatIntervalMs: chatIntervalMs)
        var reports: [FileLabReport] = []
        for name in scenarios {
            let scenario: Scenario
            do { scenario = try ScenarioSuite.scenario(named: name, directory: URL(fileURLWithPath: suite.dir)) } catch {
                FileHandle.standardError.write(Data("simp-lab: \(error)\n".utf8))
                throw ExitCode(2)
            }
            for seed in seed.seeds { reports.append(FileLab.run(scenario, seed: seed, setup: setup)) }
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            print(String(decoding: try encoder.encode(reports), as: UTF8.self))
        } else {
            print(FileLabReport.table(reports))
        }
        if let plot {
            let directory = URL(fileURLWithPath: plot, isDirectory: true)
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            for report in reports {
                let file = directory.appendingPathComponent("\(report.scenario)-\(report.seed)-files.svg")
                try Data(LabPlot.transfer(report).utf8).write(to: file)
            }
        }
        if reports.contains(where: { !$0.passed }) { throw ExitCode(1) }
    }
}
