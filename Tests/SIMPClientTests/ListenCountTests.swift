import Foundation
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// `simp listen --count N` takes N messages and leaves the rest: what arrives after the Nth (in
/// the same backlog burst) is neither printed nor receipted, so the next run prints it.
final class ListenCountTests: StoryProcessTestCase {

    func testMessagesPastTheCountAreLeftForTheNextRun() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let server = "127.0.0.1:\(relay.port)"
        let bobsEnvironment = try await environment(bob)
        let sender = try await relay.connectClient(user: alice)
        let texts = (1...6).map { "m\($0)" }
        for text in texts { _ = try await sender.send(text: text, to: bob) } // bob is offline: stored

        let counted = try ChildProcess(
            "simp", ["listen", "--server", server, "--user", bob, "--device", "phone", "--count", "2", "--allow-plaintext"],
            environment: bobsEnvironment)
        children.append(counted)
        let status = await counted.exitStatus()
        XCTAssertEqual(status, 0, counted.standardError)
        XCTAssertEqual(printed(by: [counted]), ["m1", "m2"])

        let rest = try await startListening(bob, server: server)
        let all = await Eventually.holds { self.printed(by: [rest]).count >= 4 }
        XCTAssertTrue(all, rest.standardOutput + rest.standardError)
        XCTAssertEqual(printed(by: [counted, rest]), texts, "every message once, in order")
    }
}
