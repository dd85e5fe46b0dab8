import NIOCore

/// Runs scenarios in either mode.
public enum Lab {
    /// The mode `simp-lab replay` uses without `--mode`.
    public static let defaultMode = LabMode.sim

    /// Runs `scenario` once; `seed` overrides the scenario's own.
    public static func run(_ scenario: Scenario, mode: LabMode, seed: UInt64? = nil) async throws -> ScenarioReport {
        try await execute(scenario, mode: mode, seed: seed).report
    }

    /// Runs `scenario` once and keeps every message's record and the retransmission timeline.
    public static func execute(
        _ scenario: Scenario, mode: LabMode, seed: UInt64? = nil, options: LabOptions = LabOptions()
    ) async throws -> LabRun {
        switch mode {
        case .sim: return Simulation.execute(scenario, seed: seed, options: options)
        case .real: return try await RealRun.execute(scenario, seed: seed, options: options)
        }
    }
}

/// Bounds and progress reporting for a run.
public struct LabOptions: Sendable {
    /// The most virtual time a simulated run may take, from its start (nil: enough for the
    /// workload plus `Simulation.drainLimit`).
    public var maxVirtualTime: TimeAmount?
    /// The most wall-clock time a run may take: a simulation stops there (nil:
    /// `Simulation.defaultMaxWallTime`); a real run stops waiting for outcomes there (nil: at
    /// most `RealRun.drainLimit` after the last send).
    public var maxWallTime: TimeAmount?
    /// Called a few times a second during the run (from any thread).
    public var progress: (@Sendable (LabProgress) -> Void)?
    /// How often `progress` is called.
    public var progressInterval: TimeAmount = .milliseconds(250)

    public init() {}
}

/// Where a run is, for a live progress line.
public struct LabProgress: Sendable, Equatable {
    public var scenario: String
    /// Seconds since the workload started: virtual in sim mode, wall-clock in real mode.
    public var clockSeconds: Double
    /// Messages the workload will send in all.
    public var total: Int
    public var sent: Int
    public var delivered: Int
    /// Sent, but neither receipted nor failed yet.
    public var inFlight: Int
    public var failed: Int

    /// One line: `loss-10  t=12.4s  sent 620/1000  delivered 611  in flight 9`.
    public var line: String {
        let clock = (clockSeconds * 10).rounded() / 10
        var text = "\(scenario)  t=\(clock)s  sent \(sent)/\(total)  delivered \(delivered)  in flight \(inFlight)"
        if failed > 0 { text += "  failed \(failed)" }
        return text
    }
}

extension RunRecorder {
    /// The recorder's counts as progress.
    func progress(scenario: Scenario, clock: TimeAmount) -> LabProgress {
        LabProgress(
            scenario: scenario.name, clockSeconds: max(0, Double(clock.nanoseconds) / 1e9),
            total: scenario.totalMessages,
            sent: sent, delivered: delivered, inFlight: inFlight, failed: failed)
    }
}
