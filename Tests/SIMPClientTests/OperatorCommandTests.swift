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
        // The ended session tries to log in again once, is refused (locked)
        // and stops with that reason, instead of "relay still unreachable" every 30 s.
        let refused = await Eventually.holds(within: .seconds(10)) { await states.all.contains { Self.isLoginRefused($0) } }
        let seen = await states.all
        XCTAssertTrue(refused, "the locked user's reconnect is refused and said so: \(seen)")
        XCTAssertEqual(seen.filter { if case .reconnecting = $0 { true } else { false } }.count, 1, "one try, no more: \(seen)")
        XCTAssertTrue(seen.last.map(Self.isLoginRefused) ?? false, "nothing after the refusal: \(seen)")
        let stopped = await client.stopped
        XCTAssertEqual(stopped.map { if case .loginRefused = $0 { true } else { false } }, true)
        let connectedUsers = try await relay.server.statistics().connectedUsers
        XCTAssertEqual(connectedUsers, 0, "locked, the client cannot log in again")

        let unlocked = try await serverCommand(["user", "unlock", dave])
        XCTAssertEqual(unlocked.out, "user \(dave) unlocked in \(redis)\n", unlocked.err)
        await client.close()
        _ = try await relay.connectClient(user: dave) // once unlocked, dave logs in again
    }

    /// An operator ends an unlocked user's session: the client logs in again by itself (the
    /// relay says SESSION_ENDED, not that a newer session took over).
    func testAnEndedSessionOfAnUnlockedUserLogsInAgain() async throws {
        let erin = TestRelay.uniqueUser("erin")
        let client = try await relay.connectClient(user: erin)
        let states = StateLog(client)
        let ended = try await serverCommand(["sessions", "end", erin])
        XCTAssertEqual(ended.status, 0, ended.err)
        let back = await Eventually.holds(within: .seconds(10)) {
            await states.all.filter { if case .connected = $0 { true } else { false } }.count >= 2
        }
        let seen = await states.all
        XCTAssertTrue(back, "the ended session logs in again: \(seen)")
        let stopped = await client.stopped
        XCTAssertNil(stopped)
    }

    private static func isLoginRefused(_ state: ConnectionState) -> Bool {
        if case .offline(let reason) = state { return reason.hasPrefix("login refused: ") }
        return false
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
