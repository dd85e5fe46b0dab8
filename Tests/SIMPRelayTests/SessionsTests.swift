import NIOCore
import SIMPCore
import SIMPRelay
import SIMPTestSupport
import XCTest

/// `simp-server sessions` against two relays on one real Redis: the list names each user's
/// relay and address, and ending a session closes it on the relay that holds it.
final class SessionsTests: XCTestCase {
    private var cluster: TestRelayCluster!

    override func tearDown() async throws {
        await cluster?.stop()
    }

    func testSessionsAreListedWithTheirRelayAndAnOperatorEndsOne() async throws {
        cluster = try await TestRelayCluster.start(relays: 2)
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        try await cluster.relays[0].addUser(alice)
        let aliceConnection = RawControlConnection()
        try await aliceConnection.connect(port: cluster.relays[0].port)
        defer { Task { await aliceConnection.close() } }
        try await aliceConnection.login(user: alice, password: TestRelay.password(for: alice), udpPort: 5000)
        _ = try await cluster.connectClient(user: bob, relay: 1)
        let directory = SessionDirectory(redis: cluster.inspector)

        let listed = try await directory.list().filter { [alice, bob].contains($0.user) } // the Redis may be shared
        XCTAssertEqual(listed.map(\.user), [alice, bob].sorted())
        let aliceEntry = try XCTUnwrap(listed.first { $0.user == alice })
        XCTAssertEqual(aliceEntry.relayId, cluster.relays[0].server.configuration.relayId)
        XCTAssertEqual(aliceEntry.address, "127.0.0.1:5000")
        XCTAssertNotNil(aliceEntry.since)
        XCTAssertEqual(listed.first { $0.user == bob }?.relayId, cluster.relays[1].server.configuration.relayId)

        let ended = try await directory.end(alice)
        XCTAssertEqual(ended, aliceEntry)
        let closed = await Eventually.holds { aliceConnection.isClosed }
        XCTAssertTrue(closed, "the relay holding alice's session closes it")
        let error = try await aliceConnection.first(.error)
        XCTAssertEqual(error?.errorText, "the relay's operator ended \(alice)'s session")
        XCTAssertEqual(error?.errorCode, .sessionEnded, "a code, not text, says the client may log in again")
        let after = try await directory.list().filter { [alice, bob].contains($0.user) }
        XCTAssertEqual(after.map(\.user), [bob])
        let again = try await directory.end(alice)
        XCTAssertNil(again, "no session left to end")
    }
}
