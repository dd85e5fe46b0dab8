import NIOCore
import SIMPCore
import SIMPRedis
import SIMPRelay
import SIMPTestSupport
import XCTest

/// User enumeration across relays: two relays on one real Redis, and a relay after a restart,
/// answer AUTH for a real and a missing user with the same salt and iteration count, and the
/// missing users' counts are those real users have.
final class DecoyTests: XCTestCase {
    private var cluster: TestRelayCluster!

    override func tearDown() async throws {
        await cluster?.stop()
    }

    /// The salt and iteration count relay `relay` challenges `user` with.
    private func challenge(_ user: String, relay: Int) async throws -> (salt: [UInt8], iterations: UInt32) {
        let connection = RawControlConnection()
        try await connection.connect(port: cluster.relays[relay].port)
        defer { Task { await connection.close() } }
        try await connection.send(LoginClient(user: user, password: "irrelevant").start().frame)
        guard let challenge = try await connection.first(.challenge) else {
            throw RawPeerError("no CHALLENGE from relay \(relay) for \(user): \(try await connection.received())")
        }
        return (challenge.salt, challenge.iterations)
    }

    func testRelaysOnOneRedisAndARestartedRelayChallengeRealAndMissingUsersAlike() async throws {
        cluster = try await TestRelayCluster.start(relays: 2)
        let store = CredentialStore(redis: cluster.inspector)
        let before = try await store.iterationCounts() // SIMP_TEST_REDIS_URL may hold other tests' users
        let real = TestRelay.uniqueUser("alice")
        try await cluster.relays[0].addUser(real)
        let (few, many) = (UInt32.random(in: 5000...50_000), UInt32.random(in: 50_001...99_999))
        for (index, iterations) in [few, many, many].enumerated() {
            let verifier = PasswordVerifier.make(password: "p", iterations: iterations)
            try await store.add(TestRelay.uniqueUser("user\(index)"), verifier: verifier, replace: false)
        }
        let counts = try await store.iterationCounts()
        XCTAssertEqual(counts[TestRelay.testIterations], (before[TestRelay.testIterations] ?? 0) + 1)
        XCTAssertEqual(counts[few], (before[few] ?? 0) + 1)
        XCTAssertEqual(counts[many], (before[many] ?? 0) + 2)
        let missing = (0..<8).map { TestRelay.uniqueUser("ghost\($0)") }

        var first: [String: (salt: [UInt8], iterations: UInt32)] = [:]
        for user in [real] + missing { first[user] = try await challenge(user, relay: 0) }
        try await cluster.relays[1].restart()
        try await cluster.relays[0].restart()
        for user in [real] + missing {
            for relay in 0..<2 {
                let again = try await challenge(user, relay: relay)
                XCTAssertEqual(again.salt, first[user]!.salt, "\(user) on relay \(relay)")
                XCTAssertEqual(again.iterations, first[user]!.iterations, "\(user) on relay \(relay)")
            }
        }
        XCTAssertEqual(first[real]!.iterations, TestRelay.testIterations)
        for user in missing {
            XCTAssertNotNil(counts[first[user]!.iterations], "\(user)'s decoy uses a count real users have")
            XCTAssertEqual(first[user]!.salt.count, 16)
        }
    }

    func testTheDecoySecretIsCreatedOnceAndUsersCountsFollowAddAndRemove() async throws {
        cluster = try await TestRelayCluster.start(relays: 1)
        let store = CredentialStore(redis: cluster.inspector)
        let secret = try await store.decoySecret()
        let again = try await store.decoySecret()
        XCTAssertEqual(secret, again)
        XCTAssertEqual(secret.count, 32)
        let before = try await store.iterationCounts()
        let user = TestRelay.uniqueUser("carol")
        let (first, second) = (UInt32.random(in: 5000...50_000), UInt32.random(in: 50_001...99_999))
        try await store.add(user, verifier: PasswordVerifier.make(password: "p", iterations: first), replace: false)
        try await store.add(user, verifier: PasswordVerifier.make(password: "q", iterations: second), replace: true)
        let replaced = try await store.iterationCounts()
        XCTAssertEqual(replaced[first], before[first])
        XCTAssertEqual(replaced[second], (before[second] ?? 0) + 1)
        try await store.remove(user)
        let removed = try await store.iterationCounts()
        XCTAssertEqual(removed, before)
    }

    func testTheFirstRelayOfARedisCountsUsersStoredBeforeTheCountsWereKept() async throws {
        let redis = try await RedisServerProcess.startPrivate() // the first relay of an empty Redis
        let inspector = RedisClient(url: redis.url)
        defer {
            Task {
                await inspector.shutdown(); await redis.stop()
            }
        }
        let store = CredentialStore(redis: inspector)
        for (index, iterations) in [4096, 4096, 9000].enumerated() {
            try await store.add("old\(index)", verifier: PasswordVerifier.make(password: "p", iterations: UInt32(iterations)), replace: false)
        }
        _ = try await inspector.command(["DEL", CredentialStore.iterationCountsKey]) // as written by an older simp-server

        let relay = try await TestRelay.start(redis: redis)
        await relay.stopKeepingRedis()

        let counts = try await store.iterationCounts()
        XCTAssertEqual(counts, [4096: 2, 9000: 1])
    }

    func testALockedUserCannotLogInAndOnlyTheRightPasswordLearnsWhy() async throws {
        cluster = try await TestRelayCluster.start(relays: 1)
        let relay = cluster.relays[0]
        let store = CredentialStore(redis: cluster.inspector)
        let alice = TestRelay.uniqueUser("alice")
        try await relay.addUser(alice)
        try await store.setLocked(alice, true)
        let isLocked = try await store.isLocked(alice)
        XCTAssertTrue(isLocked)

        func loginAnswer(_ password: String) async throws -> String {
            let connection = RawControlConnection()
            try await connection.connect(port: relay.port)
            defer { Task { await connection.close() } }
            do {
                try await connection.login(user: alice, password: password, udpPort: 5000)
                return "logged in"
            } catch {
                return try await connection.first(.error)?.errorText ?? "\(error)"
            }
        }
        let lockedAnswer = try await loginAnswer(TestRelay.password(for: alice))
        let wrongAnswer = try await loginAnswer("wrong")
        XCTAssertEqual(lockedAnswer, RelayLogin.lockedText, "the right password learns the account is locked")
        XCTAssertEqual(wrongAnswer, "login failed: unknown user or wrong password", "a guesser learns nothing")
        try await store.setLocked(alice, false)
        let unlockedAnswer = try await loginAnswer(TestRelay.password(for: alice))
        XCTAssertEqual(unlockedAnswer, "logged in")
        do {
            try await store.setLocked(TestRelay.uniqueUser("nobody"), true)
            XCTFail("locking a missing user fails")
        } catch let failure as CredentialStore.Failure {
            guard case .noSuchUser = failure else { return XCTFail("\(failure)") }
        }
    }
}
