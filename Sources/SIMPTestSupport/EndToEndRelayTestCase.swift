import Foundation
import SIMPClient

/// A `RelayTestCase` whose clients encrypt end to end and keep their state in one temporary
/// home per test (`home`), removed after the test.
open class EndToEndRelayTestCase: RelayTestCase {
    /// Where this test's clients keep their end-to-end state (their `$SIMP_HOME`).
    public private(set) var home: URL!

    /// Starts the relay (`RelayTestCase.setUp`) and picks a fresh home.
    open override func setUp() async throws {
        try await super.setUp()
        home = FileManager.default.temporaryDirectory.appendingPathComponent("simp-e2e-\(UUID().uuidString)")
    }

    /// Removes the home, then stops the relay.
    open override func tearDown() async throws {
        try? FileManager.default.removeItem(at: home)
        try await super.tearDown()
    }

    /// Connects `user`'s `device` to the test's relay with end to end on and its state under
    /// `home`; `configure` changes anything else (an outbox, user keys, retransmission).
    public func connectEndToEnd(
        _ user: String, device: String, configure: @escaping (inout ClientConfiguration) -> Void = { _ in }
    ) async throws -> SIMPClient {
        let home = self.home!
        return try await relay.connectClient(user: user) { configuration in
            configuration.device = device
            configuration.endToEnd = EndToEndSettings(home: home)
            configure(&configuration)
        }
    }
}
