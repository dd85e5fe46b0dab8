import NIOCore
import SIMPCore
import XCTest

/// Login and datagram authentication in the core: a real `ClientSession` logs in to a real
/// `RelayCore` whose Redis answers are played by the test.
final class RelayLoginTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(10_000_000_000)
    private let peer = try! SocketAddress(ipAddress: "192.0.2.10", port: 40_000)
    private let verifier = PasswordVerifier.make(password: "correct horse", iterations: PasswordVerifier.minimumIterations)
    private var nextConnection: UInt64 = 1

    private func relayCore(_ configure: (inout RelayCore.Configuration) -> Void = { _ in }) -> RelayCore {
        var configuration = RelayCore.Configuration(relayId: "r1", udpPort: 7001)
        configure(&configuration)
        return RelayCore(configuration: configuration)
    }

    private func client(_ user: String, password: String?) -> ClientSession {
        ClientSession(configuration: .init(user: user, firstMessageId: 1, password: password))
    }

    private func sent(_ actions: [RelayCore.Action]) -> [SIMPMessage] {
        actions.compactMap { if case .send(_, let message) = $0 { return message } else { return nil } }
    }
    private func rejected(_ actions: [RelayCore.Action]) -> [RejectReason] {
        actions.compactMap { if case .reject(let reason, _) = $0 { return reason } else { return nil } }
    }

    /// Runs a whole login between `session` and `core`: the relay's Redis knows `stored` for
    /// the user (nil: no such user). Returns the last relay actions and the client's last step.
    @discardableResult
    private func login(
        _ session: inout ClientSession, to core: inout RelayCore, stored: PasswordVerifier?, from address: SocketAddress? = nil
    ) -> (connection: ConnectionID, actions: [RelayCore.Action], step: ClientSession.LoginStep?) {
        let connection = ConnectionID(nextConnection)
        nextConnection += 1
        let address = address ?? peer
        var actions = core.connectionOpened(connection, peer: address, now: t0)
        var frames = [session.beginLogin(udpPort: 5000)]
        var step: ClientSession.LoginStep?
        while let frame = frames.popLast() {
            actions = core.controlReceived(frame, on: connection, peer: address, now: t0)
            for action in actions {
                switch action {
                case .fetchVerifier(_, let id): actions += core.verifierFetched(id, verifier: stored)
                case .register(_, _, _, let id): actions += core.registrationCompleted(id, succeeded: true)
                default: break
                }
            }
            for message in sent(actions) {
                step = session.loginReceived(message, now: t0)
                if case .send(let next)? = step { frames.append(next) }
            }
        }
        return (connection, actions, step)
    }

    func testTheRightPasswordLogsInAndBothSidesShareTheSessionKeys() throws {
        var core = relayCore()
        var alice = client("alice", password: "correct horse")

        let result = login(&alice, to: &core, stored: verifier)

        guard case .registered(let connected, let output)? = result.step else { return XCTFail("\(String(describing: result.step))") }
        XCTAssertTrue(connected.sessionSecret.isEmpty, "with login, the session secret never crosses the wire")
        XCTAssertTrue(core.isConnected("alice"))
        let hello = try XCTUnwrap(alice.seal(try XCTUnwrap(output.datagrams.first)))
        let answer = core.datagramReceived(hello, from: try SocketAddress(ipAddress: "192.0.2.10", port: 5000), now: t0)
        guard case .reply(let reply, _)? = answer.first else { return XCTFail("\(answer)") }
        _ = alice.datagramArrived(reply, arrivedAt: t0, now: t0)
        XCTAssertEqual(alice.rejectedDatagrams, 0, "the relay's HELLO opens with the client's keys")
    }

    func testAWrongPasswordAndAnUnknownUserGetTheSameAnswer() {
        var core = relayCore()
        var wrong = client("alice", password: "tr0ub4dor")
        var ghost = client("nobody", password: "whatever")

        let wrongResult = login(&wrong, to: &core, stored: verifier)
        let ghostResult = login(&ghost, to: &core, stored: nil)

        XCTAssertEqual(rejected(wrongResult.actions), [.authFailed])
        XCTAssertEqual(rejected(ghostResult.actions), [.authFailed])
        XCTAssertEqual(sent(wrongResult.actions).map(\.errorText), sent(ghostResult.actions).map(\.errorText))
        XCTAssertFalse(core.isConnected("alice"))
        XCTAssertFalse(core.isConnected("nobody"))
    }

    func testARecordedLoginCannotBeReplayed() {
        var core = relayCore()
        var alice = client("alice", password: "correct horse")
        let first = ConnectionID(100)
        core.connectionOpened(first, peer: peer, now: t0)
        let auth = alice.beginLogin(udpPort: 5000)
        let fetch = core.controlReceived(auth, on: first, peer: peer, now: t0)
        XCTAssertEqual(fetch.count, 1)
        let challenge = sent(core.verifierFetched(first, verifier: verifier))[0]
        guard case .send(let recordedConnect)? = alice.loginReceived(challenge, now: t0) else { return XCTFail() }

        // An eavesdropper replays AUTH and the recorded CONNECT on its own connection.
        let replay = ConnectionID(101)
        core.connectionOpened(replay, peer: peer, now: t0)
        _ = core.controlReceived(auth, on: replay, peer: peer, now: t0)
        _ = core.verifierFetched(replay, verifier: verifier)
        let actions = core.controlReceived(recordedConnect, on: replay, peer: peer, now: t0)

        XCTAssertEqual(rejected(actions), [.authFailed], "the relay's nonce differs, so the old proof fails")
    }

    func testConnectWithoutLoginIsRefusedWhenLoginIsRequired() {
        var core = relayCore()
        let connection = ConnectionID(1)
        core.connectionOpened(connection, peer: peer, now: t0)
        var connect = SIMPMessage(kind: .connect, fromUser: "alice")
        connect.udpPort = 5000

        let actions = core.controlReceived(connect, on: connection, peer: peer, now: t0)

        XCTAssertEqual(rejected(actions), [.authRequired])
        XCTAssertEqual(sent(actions).map(\.errorCode), [.authRequired])
        XCTAssertFalse(core.isConnected("alice"))
    }

    func testAClientWithoutPasswordIsToldOneIsNeeded() {
        var core = relayCore()
        var alice = client("alice", password: nil)
        let result = login(&alice, to: &core, stored: verifier)
        guard case .refused(let code, let reason)? = result.step else { return XCTFail() }
        XCTAssertEqual(code, .authFailed)
        XCTAssertEqual(reason, LoginClient.Failure.passwordRequired.description)
    }

    func testAnImpostorRelayIsDetectedByItsSignature() {
        var core = relayCore()
        var alice = client("alice", password: "correct horse")
        // The impostor holds a verifier of the same salt but another password.
        var stolenSalt = PasswordVerifier.make(password: "other", iterations: verifier.iterations)
        stolenSalt.salt = verifier.salt
        stolenSalt.storedKey = verifier.storedKey // passes the proof check, cannot sign
        let result = login(&alice, to: &core, stored: stolenSalt)
        guard case .refused(_, let reason)? = result.step else { return XCTFail("\(String(describing: result.step))") }
        XCTAssertEqual(reason, LoginClient.Failure.relayNotAuthentic.description)
    }

    func testLoginAttemptsFromOneAddressAreRateLimited() {
        var core = relayCore { $0.loginLimit = RateLimit(perSecond: 0.1, burst: 3) }
        var results: [[RejectReason]] = []
        for _ in 0..<4 {
            var mallory = client("alice", password: "guess")
            results.append(rejected(login(&mallory, to: &core, stored: verifier).actions))
        }
        XCTAssertEqual(results, [[.authFailed], [.authFailed], [.authFailed], [.loginRateLimited]])
        var other = client("alice", password: "correct horse")
        let elsewhere = try! SocketAddress(ipAddress: "198.51.100.7", port: 1)
        guard case .registered? = login(&other, to: &core, stored: verifier, from: elsewhere).step else {
            return XCTFail("another address is not limited")
        }
    }

    func testConnectionsFromOneAddressAreRateLimited() {
        var core = relayCore { $0.connectionLimit = RateLimit(perSecond: 1, burst: 2) }
        let verdicts = (1...3).map { core.connectionOpened(ConnectionID($0), peer: peer, now: t0) }
        XCTAssertEqual(verdicts.map(rejected), [[], [], [.connectionRateLimited]])
        XCTAssertEqual(sent(verdicts[2]).map(\.errorCode), [.rateLimited])
        XCTAssertGreaterThan(sent(verdicts[2])[0].retryAfterMillis, 0)
    }
}
