import Foundation
import SIMPClient
import SIMPCommandLine

/// A `RelayTestCase` whose `simp` processes share a private `$SIMP_HOME` (device names, locks,
/// outboxes, history), removed after each test.
open class ClientHomeTestCase: RelayTestCase {
    /// This test's `$SIMP_HOME` (created by `simp` when it first needs it).
    public var home: URL!

    /// Starts the relay and picks a new, not yet created `$SIMP_HOME`.
    open override func setUp() async throws {
        try await super.setUp()
        home = FileManager.default.temporaryDirectory.appendingPathComponent("simp-home-\(UUID().uuidString)")
    }

    /// Removes the test's `$SIMP_HOME`, then stops the relay.
    open override func tearDown() async throws {
        try? FileManager.default.removeItem(at: home)
        try await super.tearDown()
    }

    /// The environment that gives `simp` `user`'s password (the user is created on the relay)
    /// and this test's `$SIMP_HOME`.
    public func environment(_ user: String) async throws -> [String: String] {
        try await relay.addUser(user)
        return [PasswordInput.environmentVariable: TestRelay.password(for: user), "SIMP_HOME": home.path]
    }
}
