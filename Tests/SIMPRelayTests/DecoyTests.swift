import NIOCore
import SIMPCore
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
        let real = TestRelay.uniqueUser("alice")
        try await cluster.relays[0].addUser(real)
        for (index, iterations) in [5000, 7000, 7000].enumerated() {
            let verifier = PasswordVerifier.make(password: "p", iterations: UInt32(iterations))
            try await store.add(TestRelay.uniqueUser("user\(index)"), verifier: verifier, replace: false)
        }
        let counts = try await store.iterationCounts()
        XCTAssertEqual(counts, [TestRelay.testIterations: 1, 5000: 1, 7000: 2])
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
        let user = TestRelay.uniqueUser("carol")
        try await store.add(user, verifier: PasswordVerifier.make(password: "p", iterations: 5000), replace: false)
        try await store.add(user, verifier: PasswordVerifier.make(password: "q", iterations: 6000), replace: true)
        let replaced = try await store.iterationCounts()
        XCTAssertEqual(replaced, [6000: 1])
        try await store.remove(user)
        let removed = try await store.iterationCounts()
        XCTAssertEqual(removed, [:])
    }

    func testALockedUserCannotLogInAndIsToldWhatAWrongPasswordIsTold() async throws {
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
        XCTAssertEqual(lockedAnswer, wrongAnswer)
        XCTAssertTrue(lockedAnswer.contains("login failed"), lockedAnswer)
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
