import SIMPClient
import SIMPCore
import SIMPRelay
import SIMPTestSupport
import XCTest

/// The client sends a request the relay refused over its budget (RATE_LIMITED) again after
/// `retryAfterMillis`: with a room-join budget of 2 a second and a burst of 1, joins one after
/// another all succeed, the later ones after the relay said when to try again.
final class RequestRetryRelayTests: RelayTestCase {
    override func configureRelay(_ configuration: inout RelayConfiguration) {
        configuration.limits.budgets[.roomJoin] = RateLimit(perSecond: 2, burst: 1)
    }

    func testJoinsOverTheBudgetSucceedAfterTheRelaysRetryAfter() async throws {
        let user = TestRelay.uniqueUser("alice")
        let alice = try await relay.connectClient(user: user)
        let started = ContinuousClock.now
        for index in 0..<3 {
            let members = try await alice.joinRoom("retry-\(index)")
            XCTAssertEqual(members, [user], "join \(index)")
        }
        let took = ContinuousClock.now - started
        // A burst of 1 at 2 a second: the second and third joins were refused first and waited.
        XCTAssertGreaterThanOrEqual(took, .milliseconds(900), "the third join waited for the budget")
        await alice.close()
    }

    /// Three joins written in one go (one read, with the relay's 64-byte first receive buffer):
    /// the relay takes the first (a burst of 1), refuses the second and the third read with it,
    /// and answers both in one ERROR RATE_LIMITED when its pause ends (`messageId` 2,
    /// `receiptIds` [3]); before, the third was refused without a word.
    func testJoinsWrittenTogetherAreRefusedInOneErrorNamingEach() async throws {
        let user = TestRelay.uniqueUser("alice")
        try await relay.addUser(user)
        let device = try await RawDevice(user: user, password: TestRelay.password(for: user), device: "raw", controlPort: relay.port)
        let tag = String(UInt16.random(in: .min ... .max), radix: 36)
        let joins = (1...3).map { id -> SIMPMessage in
            var join = SIMPMessage(kind: .roomJoin, messageId: UInt64(id))
            join.room = "r\(id)\(tag)"
            return join
        }
        try await device.control.send(joins)
        let refused = try await device.control.first(.error)
        XCTAssertEqual(refused?.errorCode, .rateLimited)
        XCTAssertEqual(refused.map { [$0.messageId] + $0.receiptIds }, [2, 3], "one ERROR names both refused joins")
        try await Task.sleep(for: .milliseconds(300))
        let errors = try await device.control.received().filter { $0.kind == .error }
        XCTAssertEqual(errors.count, 1, "and only one is sent")
        await device.close()
    }

    /// Joins sent at once: the relay reads several in one burst, refuses the second and the
    /// rest read with it, and tells them all in one ERROR when its pause ends; the client sends
    /// each again, and every join succeeds (a refused request the relay did not name would wait
    /// for its 10 s deadline and fail as timed out).
    func testJoinsSentAtOnceOverTheBudgetAllSucceed() async throws {
        let user = TestRelay.uniqueUser("alice")
        let alice = try await relay.connectClient(user: user)
        let members = try await withThrowingTaskGroup(of: [String].self) { group in
            for index in 0..<5 { group.addTask { try await alice.joinRoom("at-once-\(index)") } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        XCTAssertEqual(members, Array(repeating: [user], count: 5))
        await alice.close()
    }
}
