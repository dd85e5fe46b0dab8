import CCallgrind

/// One measured kind of message of an instruction-count workload (`scripts/bench-guard`): its
/// name in the report and the baseline (`relay.datagram`), and how many messages were counted.
public struct InstructionPhase: Equatable, Sendable {
    public var name: String
    public var messages: Int

    public init(name: String, messages: Int) {
        self.name = name
        self.messages = messages
    }
}

/// Marks what callgrind counts in a workload run under `valgrind --tool=callgrind
/// --instr-atstart=no --collect-atstart=no`: only the code between `measure`'s toggles, one
/// dump per phase (named after it). Outside valgrind every mark does nothing, so a workload
/// runs (and checks its results) the same way in a plain process.
public struct InstructionMarks {
    /// Extra work per counted message, for the guard's own test (a deliberately slower build):
    /// this many rounds of an integer mix inside every counted window. 0 in real measurements.
    public var extraWork: Int

    public init(extraWork: Int = 0) {
        self.extraWork = extraWork
    }

    /// Whether the process runs under valgrind (and the build had valgrind's headers).
    public static var underValgrind: Bool { simp_callgrind_running() != 0 }

    /// Starts callgrind's instrumentation (once, after the workload's setup).
    public func startInstrumentation() { simp_callgrind_start_instrumentation() }

    /// Runs `body`, with counting on if `counted` (warm-up messages are not). The marks do
    /// not nest.
    @inline(never)
    public func measure<Result>(if counted: Bool = true, _ body: () throws -> Result) rethrows -> Result {
        guard counted else { return try body() }
        simp_callgrind_toggle_collect()
        defer { simp_callgrind_toggle_collect() }
        let result = try body()
        if extraWork > 0 { InstructionMarks.sink &+= Self.mix(rounds: extraWork) }
        return result
    }

    /// Writes what was counted since the previous phase as `phase`'s dump, described as
    /// `name/messages` (`InstructionGuard.readDumps` reads it).
    public func finish(_ phase: InstructionPhase) { simp_callgrind_dump("\(phase.name)/\(phase.messages)") }

    /// Phase `name`: `warmup + count` steps on `run`, the last `count` of them told they are
    /// counted (each step counts its own work with `measure(if:)`), then `finish`ed.
    public func phase<Run>(
        _ name: String, count: Int, warmup: Int, on run: inout Run, _ step: (inout Run, _ counted: Bool) throws -> Void
    ) rethrows -> InstructionPhase {
        for index in 0..<(warmup + count) { try step(&run, index >= warmup) }
        let phase = InstructionPhase(name: name, messages: count)
        finish(phase)
        return phase
    }

    /// Where the extra work's result goes, so that the optimizer keeps it.
    nonisolated(unsafe) static var sink: UInt64 = 0

    @inline(never)
    static func mix(rounds: Int) -> UInt64 {
        var state = UInt64(truncatingIfNeeded: rounds) | 1
        for _ in 0..<rounds { state = (state ^ (state >> 31)) &* 0x9E37_79B9_7F4A_7C15 }
        return state
    }
}

/// A workload's failure: what it expected of the relay or the client and what came instead.
public struct WorkloadError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
