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
        let said = await Eventually.holds { second.standardError.contains("still trying") }
        XCTAssertTrue(said, second.standardOutput + second.standardError)
        XCTAssertTrue(second.standardError.contains("\(bob)'s inbox is full"), second.standardError)
        XCTAssertTrue(second.standardOutput.contains("message "), "its id was printed at once: \(second.standardOutput)")
    }

    /// A `simp send` to a user who never logged in (no end-to-end keys yet) is not refused: it
    /// says the message waits for that user's first login; Ctrl-C leaves it in the outbox, and
    /// the next `simp send` of the same device, after erin's first login, delivers it end to end.
    func testASendToAUserWhoNeverLoggedInWaitsAndTheNextSendDeliversIt() async throws {
        let alice = TestRelay.uniqueUser("alice"), erin = TestRelay.uniqueUser("erin")
        let server = "127.0.0.1:\(relay.port)"
        let erinEnvironment = try await environment(erin)
        let environment = try await environment(alice)
        let first = try ChildProcess(
            "simp", ["send", "--server", server, "--user", alice, "--device", "desk", "--to", erin, "welcome"], environment: environment)
        children.append(first)
        let said = await Eventually.holds { first.standardError.contains("waiting for \(erin)'s first login") }
        XCTAssertTrue(said, first.standardOutput + first.standardError)
        XCTAssertFalse(first.standardError.contains("--no-e2e"), "no suggestion to send unencrypted: \(first.standardError)")
        first.signal(SIGINT)
        let status = await first.exitStatus()
        XCTAssertEqual(status, 128 + SIGINT, first.standardError)

        let listen = try ChildProcess(
            "simp", ["listen", "--server", server, "--user", erin, "--json", "--count", "1"], environment: erinEnvironment)
        children.append(listen)
        let published = try await Eventually.holds {
            try await self.relay.inspector.command(["HLEN", "simp:keys:{\(erin)}"]).integer == 1
        }
        XCTAssertTrue(published, listen.standardError)
        let second = try ChildProcess(
            "simp", ["send", "--server", server, "--user", alice, "--device", "desk", "--to", erin, "and hello"], environment: environment)
        children.append(second)
        let secondStatus = await second.exitStatus()
        XCTAssertEqual(secondStatus, 0, second.standardError)
        XCTAssertTrue(second.standardError.contains("resending 1 message left in the outbox"), second.standardError)
        let listened = await listen.exitStatus()
        XCTAssertEqual(listened, 0, listen.standardError)
        XCTAssertTrue(listen.standardOutput.contains("\"welcome\""), listen.standardOutput)
    }
}
