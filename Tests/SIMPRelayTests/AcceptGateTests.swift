import SIMPBench
import SIMPCore
import SIMPRelay
import SIMPTestSupport
import XCTest

/// A connection from an address that already holds its cap of connections not logged in is
/// closed as the relay accepts it, before it is set up and without an ERROR, and counted
/// (`unauthenticated_limit`); the address's other connections and other addresses are not
/// affected.
final class AcceptGateTests: RelayTestCase {
    override func configureRelay(_ configuration: inout RelayConfiguration) {
        configuration.limits.maxUnauthenticatedPerHost = 3
    }

    func testConnectionsOverAnAddresssCapAreClosedAsAcceptedWithoutAWordAndCounted() async throws {
        let port = relay.port
        let waiting = try (0..<3).map { _ in try AttackSocket(port: port, from: "127.0.0.77") }
        try await Task.sleep(for: .milliseconds(500)) // the relay has them open (the gate counts what it has set up)
        var refused: [AttackSocket] = []
        for _ in 0..<7 {
            refused.append(try AttackSocket(port: port, from: "127.0.0.77"))
            try await Task.sleep(for: .milliseconds(100))
        }
        defer { for socket in waiting + refused { socket.close() } }
        let counted = await Eventually.holds(within: .seconds(10)) {
            (try? await self.relay.server.statistics().rejected[.unauthenticatedLimit]) == 7
        }
        let rejected = try await relay.server.statistics().rejected
        XCTAssertTrue(counted, "\(rejected)")
        let drained = refused.map { $0.drain() }
        XCTAssertEqual(drained.map(\.closed), Array(repeating: true, count: 7), "closed")
        XCTAssertEqual(drained.map(\.bytes), Array(repeating: 0, count: 7), "closed as accepted: no ERROR was written")
        XCTAssertEqual(waiting.map { $0.drain().closed }, [false, false, false], "the first three wait for their login")
        let alice = try await relay.connectClient(user: TestRelay.uniqueUser("alice"))
        await alice.close()
    }
}
