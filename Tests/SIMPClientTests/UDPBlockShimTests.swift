import Foundation
import SIMPTestSupport
import XCTest

/// The LD_PRELOAD shim the UDP-blocked tests run the real `simp` under: the process logs in over
/// TCP, and not one of its datagrams reaches the relay; without the shim they do.
final class UDPBlockShimTests: StoryProcessTestCase {
    private func datagramsReceived() async throws -> Int { try await relay.server.statistics().datagramsReceived }

    func testTheShimDropsAProcessUDPAndPassesItsTCP() async throws {
        let blocked = TestRelay.uniqueUser("blocked"), open = TestRelay.uniqueUser("open"), bob = TestRelay.uniqueUser("bob")
        _ = try await environment(bob) // bob exists and is offline: a message to him is stored
        let server = "127.0.0.1:\(relay.port)"

        let shimmed = try ChildProcess(
            "simp", ["send", "--server", server, "--user", blocked, "--to", bob, "--no-e2e", "over a UDP-blocking network"],
            environment: try await environment(blocked).merging(try await UDPBlockShim.environment()) { $1 })
        children.append(shimmed)
        // It logged in over TCP (the id is printed once CONNECTED) and sent its datagrams.
        let loggedIn = await Eventually.holds { shimmed.standardOutput.contains("message ") }
        XCTAssertTrue(loggedIn, shimmed.standardOutput + shimmed.standardError)
        // Quiet period: its HELLO, its message and their retransmissions would have arrived.
        let noneArrived = try await Eventually.stays(for: .milliseconds(1500)) { try await self.datagramsReceived() == 0 }
        let fromShimmed = try await datagramsReceived()
        XCTAssertTrue(noneArrived && fromShimmed == 0, "\(fromShimmed) datagrams of the shimmed process reached the relay")
        shimmed.signal(SIGKILL)

        // The same without the shim: its datagrams arrive and the message is stored for bob.
        let unshimmed = try ChildProcess(
            "simp", ["send", "--server", server, "--user", open, "--to", bob, "--no-e2e", "over an open network"],
            environment: try await environment(open))
        children.append(unshimmed)
        let status = await unshimmed.exitStatus()
        XCTAssertEqual(status, 0, unshimmed.standardError)
        let fromUnshimmed = try await datagramsReceived()
        XCTAssertGreaterThan(fromUnshimmed, 0)
    }

    /// With SIMP_UDP_BLOCK_AFTER_MS the process's UDP works until then.
    func testTheShimLetsUDPThroughUntilItsStartTime() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        _ = try await environment(bob)
        let send = try ChildProcess(
            "simp", ["send", "--server", "127.0.0.1:\(relay.port)", "--user", alice, "--to", bob, "--no-e2e", "before the block"],
            environment: try await environment(alice).merging(try await UDPBlockShim.environment(afterMs: 600_000)) { $1 })
        children.append(send)
        let status = await send.exitStatus()
        XCTAssertEqual(status, 0, send.standardError)
        XCTAssertTrue(send.standardOutput.contains("stored"), send.standardOutput)
        let received = try await datagramsReceived()
        XCTAssertGreaterThan(received, 0)
    }
}
