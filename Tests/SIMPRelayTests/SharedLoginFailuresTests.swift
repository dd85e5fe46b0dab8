import NIOCore
import SIMPCore
import SIMPRelay
import SIMPTestSupport
import XCTest

/// Failed logins are counted in Redis, for every relay sharing it: a guesser who spreads its
/// guesses over two relays waits as it would on one (real relays, real Redis).
final class SharedLoginFailuresTests: XCTestCase {
    private var cluster: TestRelayCluster?

    override func tearDown() async throws {
        await cluster?.stop()
    }

    /// AUTH as `user` from `source` at `relay`, and a wrong proof if challenged: the relay's ERROR.
    private func guess(_ user: String, at relay: TestRelay, from source: String) async throws -> SIMPMessage.ErrorCode? {
        let guesser = RawControlConnection()
        defer { Task { await guesser.close() } }
        try await guesser.connect(port: relay.port, from: source)
        var auth = SIMPMessage(kind: .auth, fromUser: user)
        auth.nonce = Array(repeating: 7, count: 24)
        try await guesser.send(auth)
        _ = try await Eventually.holds { try await guesser.received().contains { [.challenge, .error].contains($0.kind) } }
        if try await guesser.received().contains(where: { $0.kind == .challenge }) {
            var connect = SIMPMessage(kind: .connect, fromUser: user)
            connect.udpPort = 9
            connect.proof = Array(repeating: 0, count: 32)
            try await guesser.send(connect)
        }
        return try await guesser.first(.error)?.errorCode
    }

    func testGuessesSpreadOverTwoRelaysWaitAsOnOne() async throws {
        let cluster = try await TestRelayCluster.start(relays: 2)
        self.cluster = cluster
        let bob = TestRelay.uniqueUser("bob")
        try await cluster.relays[0].addUser(bob)
        var answers: [SIMPMessage.ErrorCode?] = []
        for index in 0..<8 {
            answers.append(try await guess(bob, at: cluster.relays[index % 2], from: "127.0.0.2"))
            // The failure is recorded in Redis by a write of its own, after the ERROR.
            let failures = answers.filter { $0 == .authFailed }.count
            _ = try await Eventually.holds {
                try await cluster.inspector.command(["HGET", CredentialStore.failuresKey(bob, from: "127.0.0.2"), "n"]).string == "\(failures)"
            }
        }
        XCTAssertEqual(
            answers, Array(repeating: .authFailed, count: 6) + [.rateLimited, .rateLimited],
            "five free failures from one address, however many relays it spreads them over; the sixth starts the wait")
        let shared = try await cluster.inspector.command(["HGET", CredentialStore.failuresKey(bob, from: "127.0.0.2"), "n"]).string
        XCTAssertEqual(shared, "6", "the count both relays read and add to")
        // The owner, from his own address, is not kept out by the guesser.
        let owner = RawControlConnection()
        defer { Task { await owner.close() } }
        try await owner.connect(port: cluster.relays[1].port, from: "127.0.0.1")
        try await owner.login(user: bob, password: TestRelay.password(for: bob), udpPort: 9)
    }
}
