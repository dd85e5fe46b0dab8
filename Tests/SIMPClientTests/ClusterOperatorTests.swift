import SIMPClient
import SIMPRedis
import SIMPTestSupport
import XCTest

/// `simp-server user …` and `simp-server sessions …` against relays on a Redis Cluster, given
/// as an operator does: `SIMP_REDIS=redis+cluster://…`.
final class ClusterOperatorTests: XCTestCase {
    func testAnOperatorAddsAndListsUsersAndEndsASessionOnACluster() async throws {
        let cluster = try await RedisClusterProcess.shared()
        let relays = try await ClusterRelays.start(on: cluster, relays: 2)
        addTeardownBlock { await relays.stop() }
        let url = "redis+cluster://" + cluster.seeds.prefix(2).map(\.address).joined(separator: ",")
        func serverCommand(_ arguments: [String]) async throws -> (status: Int32?, out: String, err: String) {
            let process = try ChildProcess("simp-server", arguments, environment: ["SIMP_REDIS": url, "SIMP_PASSWORD": "pw of the cli"])
            return (await process.exitStatus(), process.standardOutput, process.standardError)
        }
        let users = try await relays.usersOnDistinctMasters("op", count: 3)
        for user in users {
            let added = try await serverCommand(["user", "add", user, "--iterations", "4096"])
            XCTAssertTrue(added.out.hasPrefix("user \(user) added in cluster "), added.out + added.err)
        }
        let listed = try await serverCommand(["user", "list"])
        XCTAssertTrue(Set(users).isSubset(of: Set(listed.out.split(separator: "\n").map(String.init))), listed.out + listed.err)

        let client = try await relays.connectClient(user: users[2], relay: 1) { $0.reconnect = nil }
        let sessions = try await serverCommand(["sessions"])
        let row = sessions.out.split(separator: "\n").first { $0.hasPrefix(users[2] + " ") }.map(String.init) ?? ""
        XCTAssertTrue(row.contains(relays.relayId(1)), sessions.out + sessions.err)
        let ended = try await serverCommand(["sessions", "end", users[2]])
        XCTAssertTrue(ended.out.hasPrefix("session of \(users[2]) on relay \(relays.relayId(1))"), ended.out + ended.err)
        let closed = try await Eventually.holds { try await relays.relays[1].statistics().connectedUsers == 0 }
        XCTAssertTrue(closed, "the move announced on the classic channel reached the relay holding the session")
        await client.close()
    }
}
