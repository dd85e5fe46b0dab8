import Foundation
import SIMPClient

/// A `ClientHomeTestCase` whose library clients encrypt end to end, keeping their state in the
/// test's `home` (removed after the test).
open class EndToEndRelayTestCase: ClientHomeTestCase {
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
