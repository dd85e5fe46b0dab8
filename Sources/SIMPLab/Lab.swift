/// Runs scenarios in either mode.
public enum Lab {
    /// The mode `simp-lab replay` uses without `--mode`.
    public static let defaultMode = LabMode.sim

    /// Runs `scenario` once; `seed` overrides the scenario's own.
    public static func run(_ scenario: Scenario, mode: LabMode, seed: UInt64? = nil) async throws -> ScenarioReport {
        switch mode {
        case .sim: return Simulation.run(scenario, seed: seed)
        case .real: return try await RealRun.run(scenario, seed: seed)
        }
    }
}
