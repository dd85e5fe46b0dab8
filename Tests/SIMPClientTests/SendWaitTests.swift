import Foundation
import SIMPLocalServers
import SIMPTestSupport
import XCTest

/// A one-shot `simp send` that waits long for a receipt says so on standard error (the relay is
/// slow or unreachable, or the receiver's inbox is full and refuses it) instead of waiting in
/// silence; the message stays in the outbox.
final class SendWaitTests: StoryProcessTestCase {
    func testASendToAFullInboxSaysItIsStillTrying() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let port = try FreePort.tcp(), udpPort = try FreePort.udp()
        _ = try await startServer([
            "--port", String(port), "--udp-port", String(udpPort),
            "--redis", relay.redis.url.description, "--relay-id", "full-\(UInt32.random(in: .min ... .max))",
            "--inbox-max-messages", "1",
        ])
        _ = try await environment(bob) // bob exists, and is offline (never ran simp: no end-to-end keys, so --no-e2e)
        let server = "127.0.0.1:\(port)"
        let environment = try await environment(alice)
        let first = try ChildProcess(
            "simp", ["send", "--server", server, "--user", alice, "--to", bob, "--no-e2e", "first"], environment: environment)
        children.append(first)
        let firstStatus = await first.exitStatus()
        XCTAssertEqual(firstStatus, 0, first.standardError)
        XCTAssertTrue(first.standardOutput.contains("stored"), first.standardOutput)

        let second = try ChildProcess(
            "simp", ["send", "--server", server, "--user", alice, "--to", bob, "--no-e2e", "second"], environment: environment)
        children.append(second)
        let said = await Eventually.holds(within: .seconds(15)) { second.standardError.contains("still trying") }
        XCTAssertTrue(said, second.standardOutput + second.standardError)
        XCTAssertTrue(second.standardError.contains("\(bob)'s inbox is full"), second.standardError)
        XCTAssertTrue(second.standardOutput.contains("message "), "its id was printed at once: \(second.standardOutput)")
    }
}
