import Foundation
import SIMPClient
import SIMPCore
import SIMPRedis
import SIMPTestSupport
import XCTest

/// `simp-server user lock|unlock` and `simp-server sessions [end]` as an operator runs them,
/// against a relay with a logged-in client.
final class OperatorCommandTests: RelayTestCase {
    private func serverCommand(_ arguments: [String]) async throws -> (status: Int32?, out: String, err: String) {
        let process = try ChildProcess("simp-server", arguments, environment: ["SIMP_REDIS": relay.redis.url.description])
        let status = await process.exitStatus()
        return (status, process.standardOutput, process.standardError)
    }

    func testAnOperatorLocksAUserListsAndEndsItsSessionThenUnlocksIt() async throws {
        let dave = TestRelay.uniqueUser("dave")
        let client = try await relay.connectClient(user: dave)
        let states = StateLog(client)

        let locked = try await serverCommand(["user", "lock", dave])
        let users = try await serverCommand(["user", "list"])
        let listed = try await serverCommand(["sessions"])
        let ended = try await serverCommand(["sessions", "end", dave])
        let endedAgain = try await serverCommand(["sessions", "end", dave])
        let lockMissing = try await serverCommand(["user", "lock", TestRelay.uniqueUser("nobody")])

        let redis = relay.redis.url.description
        XCTAssertEqual(locked.out, "user \(dave) locked in \(redis)\n", locked.err)
        XCTAssertTrue(users.out.split(separator: "\n").contains("\(dave) (locked)"), users.out)
        XCTAssertTrue(users.err.contains(" in \(redis)"), "user list names the Redis it read: \(users.err)")
        let row = listed.out.split(separator: "\n").first { $0.hasPrefix(dave + " ") }.map(String.init) ?? ""
        XCTAssertTrue(row.contains(relay.server.configuration.relayId) && row.contains("127.0.0.1:"), listed.out + listed.err)
        XCTAssertTrue(listed.out.hasPrefix("USER"), listed.out)
        XCTAssertEqual(ended.status, 0, ended.err)
        XCTAssertTrue(ended.out.hasPrefix("session of \(dave) on relay \(relay.server.configuration.relayId)"), ended.out)
        XCTAssertEqual(endedAgain.status, 1)
        XCTAssertEqual(endedAgain.err, "simp-server sessions end: \(dave) has no session\n")
        XCTAssertEqual(lockMissing.status, 1)
        XCTAssertTrue(lockMissing.err.hasPrefix("simp-server user: no user"), lockMissing.err)
        let dropped = await Eventually.holds(within: .seconds(5)) { await states.all.contains { if case .reconnecting = $0 { true } else { false } } }
        let seen = await states.all
        XCTAssertTrue(dropped, "the relay closed the session: \(seen)")
        let connectedUsers = try await relay.server.statistics().connectedUsers
        XCTAssertEqual(connectedUsers, 0, "locked, the client cannot log in again")

        let unlocked = try await serverCommand(["user", "unlock", dave])
        XCTAssertEqual(unlocked.out, "user \(dave) unlocked in \(redis)\n", unlocked.err)
        let back = try await Eventually.holds(within: .seconds(10)) {
            try await self.relay.inspector.command(["HGET", "simp:user:{\(dave)}", "relay"]).string == self.relay.server.configuration.relayId
        }
        XCTAssertTrue(back, "once unlocked, the client logs in again by itself")
    }
}

/// Every connection state a client goes through.
private actor StateLog {
    private(set) var all: [ConnectionState] = []

    init(_ client: SIMPClient) {
        Task { [weak self] in
            for await state in client.connectionStates { await self?.append(state) }
        }
    }

    private func append(_ state: ConnectionState) { all.append(state) }
}
