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
        try await assertAStoppedListenerIsGivenUpAndItsMessageStored()
    }
}

/// The relay's default liveness, scaled down: an idle client is pinged only rarely (every
/// 10 min here, so its silence alone would not be noticed within the test), but a message
/// forwarded to a client silent for `suspectAfter` pings it at once, and a stopped one is given
/// up `answerWithin` later (docs/PROTOCOL.md §4.4; 5 s + 10 s at the defaults, 0.3 s + 0.5 s
/// here). The sender's message is then stored, not failed, and delivered once when the client
/// comes back. Failed before: the relay pinged only on its interval, so the sender gave up
/// (after 30 s here) before the relay did.
final class SuspectedClientTests: StoryProcessTestCase {
    override func configureRelay(_ configuration: inout RelayConfiguration) {
        configuration.heartbeat = HeartbeatPolicy(
            interval: .minutes(10), missLimit: 2, suspectAfter: .milliseconds(300), answerWithin: .milliseconds(500))
    }

    func testAStoppedClientThatAMessageGoesToIsGivenUpAndTheMessageIsStored() async throws {
        try await assertAStoppedListenerIsGivenUpAndItsMessageStored { $0.retransmit.giveUpAfter = .seconds(30) }
    }
}

extension StoryProcessTestCase {
    /// bob's `simp listen` gets a message, then is stopped (SIGSTOP); alice's next message to
    /// him must come back STORED (the relay gave him up: one more `heartbeat_timeout`), and
    /// once he continues he prints both messages once.
    fileprivate func assertAStoppedListenerIsGivenUpAndItsMessageStored(
        alice configure: (inout ClientConfiguration) -> Void = { _ in }, file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let listener = try await startListening(bob, server: "127.0.0.1:\(relay.port)")
        let aliceClient = try await relay.connectClient(user: alice, configure: configure)
        let before = try await aliceClient.send(text: "before the stop", to: bob)
        guard case .delivered = before else { return XCTFail("\(before)", file: file, line: line) }
        let timeoutsBefore = try await relay.server.statistics().rejected[.heartbeatTimeout] ?? 0

        listener.signal(SIGSTOP)
        let stored = try await aliceClient.send(text: "while stopped", to: bob)
        let givenUp = try await relay.server.statistics().rejected[.heartbeatTimeout] ?? 0
        listener.signal(SIGCONT)
        guard case .stored = stored else {
            return XCTFail("\(stored): a stopped client's messages are stored once it is given up", file: file, line: line)
        }
        XCTAssertEqual(givenUp, timeoutsBefore + 1, "the relay gave bob up for his silence", file: file, line: line)

        try await assertEveryMessageOnce(["before the stop", "while stopped"], printedBy: [listener])
        await aliceClient.close()
    }
}
