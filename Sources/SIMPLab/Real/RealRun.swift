/// Runs a scenario with real sockets (placeholder until the real mode lands).
public enum RealRun {
    public static func run(_ scenario: Scenario, seed: UInt64?) async throws -> ScenarioReport {
        throw LabError("real mode is not available yet")
    }
}
