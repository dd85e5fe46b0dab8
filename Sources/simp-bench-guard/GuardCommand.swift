import ArgumentParser
import Foundation
import SIMPBench

/// `simp-bench-guard`: the workloads `scripts/bench-guard` counts under callgrind, and the
/// comparison with the baseline. Synchronous on purpose: valgrind 3.19 crashes in libdispatch's
/// signal thread, which an async `main` starts.
@main
struct GuardCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simp-bench-guard",
        abstract: "Instruction counts per message of the relay and the client (run by scripts/bench-guard).",
        discussion: """
            scripts/bench-guard runs `simp-bench-guard run` under valgrind's callgrind, then \
            `simp-bench-guard check` on what callgrind wrote. Run the script, not this directly.
            """,
        subcommands: [RunWorkloads.self, CheckCounts.self])
}

/// `simp-bench-guard run`: the workloads, with callgrind's marks around each counted message.
struct RunWorkloads: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the relay's and the client's fixed workloads, marking what callgrind counts.",
        discussion: """
            Meant for `valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no` with \
            SWIFT_DETERMINISTIC_HASHING=1 (Swift seeds its hashing per process otherwise, and the \
            counts would vary). Each phase is dumped as its own callgrind file. Outside valgrind the \
            workloads run and check their results without counting. Prints each phase and its \
            message count.
            """)

    @Option(help: "Messages counted per relay phase, and chunks per file-chunk phase (after a warm-up).")
    var relayMessages = 200

    @Option(help: "Messages counted per client phase (after a warm-up); each costs the relay's many times over.")
    var clientMessages = 20

    @Option(help: "Which workloads: relay, client or all.")
    var only = "all"

    @Option(help: "Where the client workload keeps its end-to-end state (an empty directory of its own).")
    var directory: String

    @Option(help: "For the guard's own test: this many rounds of extra work in every counted message (a slower build).")
    var extraWork = 0

    func validate() throws {
        guard relayMessages >= 1, clientMessages >= 1 else { throw ValidationError("--relay-messages and --client-messages must be at least 1") }
        guard ["relay", "client", "all"].contains(only) else { throw ValidationError("--only must be relay, client or all") }
        guard extraWork >= 0 else { throw ValidationError("--extra-work must not be negative") }
    }

    func run() throws {
        if InstructionMarks.underValgrind, ProcessInfo.processInfo.environment["SWIFT_DETERMINISTIC_HASHING"] == nil {
            throw ValidationError("set SWIFT_DETERMINISTIC_HASHING=1: without it the counts vary from run to run")
        }
        let marks = InstructionMarks(extraWork: extraWork)
        var phases: [InstructionPhase] = []
        if only != "client" { phases += try RelayInstructionWorkload.run(messages: relayMessages, marks: marks) }
        if only != "relay" {
            phases += try ClientInstructionWorkload.run(messages: clientMessages, directory: URL(fileURLWithPath: directory), marks: marks)
            // A chunk costs a fraction of an end-to-end message: as many as a relay phase's messages.
            phases += try FileChunkInstructionWorkload.run(chunks: relayMessages, directory: URL(fileURLWithPath: directory), marks: marks)
        }
        for phase in phases { print("\(phase.name) \(phase.messages) messages") }
    }
}

/// `simp-bench-guard check`: callgrind's dumps against the baseline.
struct CheckCounts: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Compare the instructions per message callgrind counted with the baseline (or rewrite it).",
        discussion: """
            Reads every dump `<callgrind-out>.<n>` that `run` marked, divides its instructions by \
            its messages, prints the table and fails (exit 1) when a phase grew by more than 10 % \
            or the baseline names other phases. A drop of more than 10 % passes with a note to \
            update the baseline. --update writes the measured counts to the baseline instead.
            """)

    @Option(help: "The --callgrind-out-file given to valgrind.")
    var callgrindOut: String

    @Option(help: "The baseline file.")
    var baseline: String

    @Option(help: "What the baseline's header says was measured (one comment line each).")
    var note: [String] = []

    @Flag(help: "Write the measured counts to the baseline instead of comparing.")
    var update = false

    func run() throws {
        let measured = try InstructionGuard.readDumps(prefix: callgrindOut)
        guard !measured.isEmpty else { throw ValidationError("no phase in \(callgrindOut).*: did the workload run under callgrind?") }
        if update {
            try InstructionGuard.baselineText(measured, header: note).write(toFile: baseline, atomically: true, encoding: .utf8)
            print(InstructionGuard.report(InstructionGuard.compare(measured: measured, baseline: measured), baselineFile: baseline), terminator: "")
            print("wrote \(baseline)")
            return
        }
        let text: String
        do { text = try String(contentsOfFile: baseline, encoding: .utf8) } catch {
            throw ValidationError("cannot read the baseline \(baseline) (\(error)); scripts/bench-guard --update writes it")
        }
        let lines = InstructionGuard.compare(measured: measured, baseline: try InstructionGuard.parseBaseline(text))
        print(InstructionGuard.report(lines, baselineFile: baseline), terminator: "")
        if !InstructionGuard.passes(lines) { throw ExitCode(1) }
    }
}
