import Foundation
import NIOCore
import SIMPClient
import SIMPCore
import SIMPRelay
import SIMPTestSupport
import XCTest

/// A client whose process stops (SIGSTOP: its kernel still holds the TCP connection open, but
/// it answers nothing) is given up by the relay after `missLimit` silent intervals
/// (docs/PROTOCOL.md §4.4; 60 s at the defaults, 0.6 s here), and messages to it are stored
/// from then on, then delivered once when it comes back: 0 lost, 0 duplicated.
final class SilentClientTests: StoryProcessTestCase {
    private static let heartbeat = HeartbeatPolicy(interval: .milliseconds(300), missLimit: 2)

    override func configureRelay(_ configuration: inout RelayConfiguration) {
        configuration.heartbeat = Self.heartbeat
    }

    func testAStoppedClientIsGivenUpAndMessagesToItAreStoredThenDelivered() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let listener = try await startListening(bob, server: "127.0.0.1:\(relay.port)")
        let aliceClient = try await relay.connectClient(user: alice)
        let before = try await aliceClient.send(text: "before the stop", to: bob)
        guard case .delivered = before else { return XCTFail("\(before)") }
        let timeoutsBefore = try await relay.server.statistics().rejected[.heartbeatTimeout] ?? 0

        listener.signal(SIGSTOP)
        let stored = try await aliceClient.send(text: "while stopped", to: bob)
        let givenUp = try await relay.server.statistics().rejected[.heartbeatTimeout] ?? 0
        listener.signal(SIGCONT)
        guard case .stored = stored else { return XCTFail("\(stored): a stopped client's messages are stored once it is given up") }
        XCTAssertEqual(givenUp, timeoutsBefore + 1, "the relay gave bob up for his silence")

        try await assertEveryMessageOnce(["before the stop", "while stopped"], printedBy: [listener])
        await aliceClient.close()
    }
}
