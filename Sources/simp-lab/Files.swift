import ArgumentParser
import Foundation
import SIMPLab

struct Files: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Sends a file over each scenario's links, SIMP beside TCP, in virtual time or for real, and prints the comparison.",
        discussion: """
            The scenario's sender link and receiver link, with a bottleneck (--megabits, --buffer-ms) in front of them \
            towards the receiver. SIMP's transfer runs the real file sender and receiver with chat messages beside it \
            (one every --chat-interval-ms); the TCP model sends the same file over one connection (CUBIC, SACK, RACK). \
            Columns: goodput of each (file MB per second), their ratio and its bar (2× on a lossy path, 0.8× on a clean \
            one), completion time, file bytes sent per byte delivered, the chat messages' p99 send → arrival latency \
            during the transfer, without it, and its bar (that p99 plus one round trip). Exit status: 0 if every bar \
            passed, 1 if one failed, 2 on errors. docs/SCENARIOS.md ("File transfers") describes the model.

            --mode real runs the same path with real processes and sockets: a relay and Redis on loopback, two `simp`             clients (end to end) whose datagrams cross impairment proxies (the scenario's links, the bottleneck in front             of the sender's), and the kernel's own TCP between two network namespaces of its own, every packet through             the same bottleneck and links (needs root and /dev/net/tun; else the TCP row says why it was skipped).             --max-seconds bounds each transfer in wall-clock time; --chat-alone sets the chat messages sent without a file; \
            --relay-process runs the relay as a simp-server process of its own instead of on the lab's threads.
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

    @Option(name: .long, help: "sim: virtual time, the TCP model; real: real relay, clients and kernel TCP (root).")
    var mode: LabMode = .sim

    @Option(name: .long, help: "Real mode: wall-clock seconds allowed for each transfer.")
    var maxSeconds: Double = 180

    @Option(name: .long, help: "Real mode: the kernel TCP sender's congestion control (cubic, as the TCP model; bbr, reno).")
    var tcpCongestion = "cubic"

    @Flag(
        name: .long,
        help: """
            Real mode: run the relay as a process of its own (the simp-server built beside simp-lab), \
            not on threads of this one beside the clients and proxies.
            """
    )
    var relayProcess = false

    @Option(name: .long, help: "Chat messages sent without a file, for their usual latency (default 1000 in sim mode, 250 in real mode).")
    var chatAlone: Int?

    @Flag(name: .long, help: "Print the reports as a JSON array.")
    var json = false

    @Option(name: .long, help: ArgumentHelp("Write one SVG of transfer progress against time per run into this directory.", valueName: "dir"))
    var plot: String?

    func validate() throws {
        if !(sizeMb > 0) { throw ValidationError("--size-mb must be positive") }
        if !(megabits > 0) { throw ValidationError("--megabits must be positive") }
        if !(bufferMs >= 0) { throw ValidationError("--buffer-ms must not be negative") }
        if !(chatIntervalMs > 0) { throw ValidationError("--chat-interval-ms must be positive") }
        if !(maxSeconds > 0) { throw ValidationError("--max-seconds must be positive") }
        if let chatAlone, chatAlone < 1 { throw ValidationError("--chat-alone must be at least 1") }
        if relayProcess, mode != .real { throw ValidationError("--relay-process is for --mode real (sim mode has no processes)") }
        if relayProcess, FileLab.relayBesideThisProgram() == nil {
            throw ValidationError("--relay-process needs simp-server beside simp-lab (swift build --product simp-server, with the same -c)")
        }
    }

    func run() async throws {
        var setup = FileLab.Setup(
            fileBytes: Int(sizeMb * 1e6), bottleneck: Bottleneck(megabitsPerSecond: megabits, bufferMs: bufferMs),
            chatIntervalMs: chatIntervalMs, chatBaselineMessages: chatAlone ?? (mode == .real ? 250 : 1000))
        if mode == .real { setup.limit = .nanoseconds(Int64(maxSeconds * 1e9)) }
        setup.tcpCongestionControl = tcpCongestion
        if relayProcess { setup.relayBinary = FileLab.relayBesideThisProgram() }
        var reports: [FileLabReport] = []
        for name in scenarios {
            let scenario: Scenario
            do { scenario = try ScenarioSuite.scenario(named: name, directory: URL(fileURLWithPath: suite.dir)) } catch {
                FileHandle.standardError.write(Data("simp-lab: \(error)\n".utf8))
                throw ExitCode(2)
            }
            for seed in seed.seeds {
                if mode == .sim {
                    reports.append(FileLab.run(scenario, seed: seed, setup: setup))
                    continue
                }
                do { reports.append(try await FileLab.runReal(scenario, seed: seed, setup: setup)) } catch {
                    FileHandle.standardError.write(Data("simp-lab: \(name) seed \(seed), real mode: \(error)\n".utf8))
                    throw ExitCode(2)
                }
                if let skipped = reports.last?.tcpSkipped { FileHandle.standardError.write(Data("simp-lab: \(skipped)\n".utf8)) }
                if let failure = reports.last?.simpFailure {
                    FileHandle.standardError.write(Data("simp-lab: \(name) seed \(seed): SIMP's file did not arrive: \(failure)\n".utf8))
                }
            }
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
