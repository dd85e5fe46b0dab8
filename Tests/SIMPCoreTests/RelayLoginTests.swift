import NIOCore
import SIMPCore
import SIMPCoreTestKit
import XCTest

/// Login and datagram authentication in the core: a real `ClientSession` logs in to a real
/// `RelayCore` whose Redis answers are played by the test.
final class RelayLoginTests: XCTestCase {
    private let t0 = DevRelay.t0
    private let peer = try! SocketAddress(ipAddress: "192.0.2.10", port: 40_000)
    private let verifier = PasswordVerifier.make(password: "correct horse", iterations: PasswordVerifier.minimumIterations)
    private var nextConnection: UInt64 = 1

    private func relayCore(_ configure: @escaping (inout RelayCore.Configuration) -> Void = { _ in }) -> DevRelay {
        DevRelay(udpPort: 7001) {
            $0.requireLogin = true
            configure(&$0)
        }
    }

    private func client(_ user: String, password: String?) -> ClientSession {
        ClientSession(configuration: .init(user: user, firstMessageId: 1, password: password))
    }

    /// A wrong proof's answer on `connection`.
    private func authFailed(
        _ user: String, on connection: ConnectionID, why: String = "wrong proof", byName: Bool = true,
        text: String = "login failed: unknown user or wrong password"
    ) -> [RelayAction] {
        [
            .reject(.authFailed, detail: "login as \"\(user)\" from 192.0.2.10 on \(connection): \(why)"),
            .send(connection, .error(.authFailed, text)),
            .store(.recordLogin(LoginOutcome(user: user, host: "192.0.2.10", succeeded: false, byName: byName, policy: FailedLogins.Policy()))),
            .close(connection),
        ]
    }

    /// Runs a whole login between `session` and `core`: the relay's store knows `stored` for
    /// the user (nil: no such user). Returns the last relay actions and the client's last step.
    @discardableResult
    private func login(
        _ session: inout ClientSession, to core: inout DevRelay, stored: PasswordVerifier?, locked: Bool = false,
        from address: SocketAddress? = nil, now: NIODeadline = DevRelay.t0
    ) -> (connection: ConnectionID, actions: [RelayAction], step: ClientSession.LoginStep?) {
        let connection = ConnectionID(nextConnection)
        nextConnection += 1
        let address = address ?? peer
        var actions = core.open(connection, peer: address, now: now)
        var frames = [session.beginLogin(udpPort: 5000)]
        var step: ClientSession.LoginStep?
        while let frame = frames.popLast() {
            actions = core.control(frame, on: connection, peer: address, now: now)
            for case .store(let request) in actions {
                switch request {
                case .fetchVerifier(_, let connection, _):
                    actions += core.answer(.fetchVerifier(connection: connection, stored, locked: locked), now: now)
                case .register: actions += core.answer(DevRelay.done(request), now: now)
                default: break
                }
            }
            for case .send(_, let message) in actions {
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
        XCTAssertTrue(core.core.isConnected("alice"))
        let hello = try XCTUnwrap(alice.seal(try XCTUnwrap(output.datagrams.first)))
        let source = address("192.0.2.10", 5000)
        let answer = core.datagram(hello, from: source)
        guard answer.count == 2, answer[0] == .store(.loadInbox(user: "alice")), case .reply(let reply, to: source) = answer[1] else {
            return XCTFail("the HELLO starts alice's inbox and is answered: \(answer)")
        }
        _ = alice.datagramArrived(reply, arrivedAt: t0, now: t0)
        XCTAssertEqual(alice.rejectedDatagrams, 0, "the relay's HELLO opens with the client's keys")
    }

    func testTheSessionNamesItsDeviceInAuthAndConnectAndSaysItOnlySends() throws {
        var core = relayCore()
        var configuration = ClientSession.Configuration(user: "alice", firstMessageId: 1, password: "correct horse")
        configuration.device = "phone"
        configuration.sendOnly = true
        var alice = ClientSession(configuration: configuration)
        let connection = ConnectionID(1)
        _ = core.open(connection, peer: peer)

        let auth = alice.beginLogin(udpPort: 5000)
        var actions = core.control(auth, on: connection, peer: peer)
        for case .store(.fetchVerifier(_, let connection, _)) in actions {
            actions += core.answer(.fetchVerifier(connection: connection, verifier, locked: false))
        }
        let challenge = try XCTUnwrap(
            actions.lazy.compactMap { if case .send(_, let frame) = $0, frame.kind == .challenge { frame } else { nil } }.first)
        guard case .send(let connect)? = alice.loginReceived(challenge, now: t0) else { return XCTFail("no CONNECT") }
        let registrations = core.control(connect, on: connection, peer: peer).compactMap {
            if case .store(.register(let registration, _)) = $0 { registration } else { nil }
        }

        XCTAssertEqual([auth.kind, connect.kind], [.auth, .connect])
        XCTAssertEqual([auth.device, connect.device], ["phone", "phone"])
        XCTAssertTrue(connect.sendOnly)
        XCTAssertEqual(registrations.map { [$0.device, "\($0.receives)"] }, [["phone", "false"]], "the relay registers the device as send-only")
    }

    func testAWrongPasswordAndAnUnknownUserGetTheSameAnswer() {
        var core = relayCore()
        var wrong = client("alice", password: "tr0ub4dor")
        var ghost = client("nobody", password: "whatever")

        let wrongResult = login(&wrong, to: &core, stored: verifier)
        let ghostResult = login(&ghost, to: &core, stored: nil)

        XCTAssertEqual(wrongResult.actions, authFailed("alice", on: wrongResult.connection))
        XCTAssertEqual(ghostResult.actions, authFailed("nobody", on: ghostResult.connection), "the same ERROR text")
        XCTAssertFalse(core.core.isConnected("alice"))
        XCTAssertFalse(core.core.isConnected("nobody"))
    }

    /// A locked user who proves the password is told the account is locked (and can say so);
    /// a wrong password gets the wrong password's answer, so a guesser learns nothing.
    func testALockedUserIsToldSoOnlyWithTheRightPassword() {
        var core = relayCore()
        var alice = client("alice", password: "correct horse"), guesser = client("alice", password: "guess")

        let locked = login(&alice, to: &core, stored: verifier, locked: true)
        let guessed = login(&guesser, to: &core, stored: verifier, locked: true)

        XCTAssertEqual(
            locked.actions,
            authFailed(
                "alice", on: locked.connection, why: "the user is locked", text: "login failed: your account is locked by the relay's operator"))
        XCTAssertEqual(guessed.actions, authFailed("alice", on: guessed.connection))
        var again = client("alice", password: "correct horse")
        guard case .registered? = login(&again, to: &core, stored: verifier).step else { return XCTFail("unlocked, alice logs in") }
    }

    func testFailedLoginsMakeTheNameWaitWhetherItExistsOrNot() {
        var core = relayCore {
            $0.loginBackoff = FailedLogins.Policy(perSource: LoginBackoff.Policy(freeFailures: 2, firstDelay: .seconds(4), maxDelay: .seconds(60)))
        }
        for user in ["alice", "nobody"] {
            for _ in 0..<3 {
                var guess = client(user, password: "guess")
                _ = login(&guess, to: &core, stored: user == "alice" ? verifier : nil)
            }
        }
        var alice = client("alice", password: "correct horse"), ghost = client("nobody", password: "whatever")
        let refusedAlice = login(&alice, to: &core, stored: verifier), refusedGhost = login(&ghost, to: &core, stored: nil)
        for (user, refused) in [("alice", refusedAlice), ("nobody", refusedGhost)] {
            let c = refused.connection
            XCTAssertEqual(
                refused.actions,
                [
                    .reject(.loginRateLimited, detail: "\(c): \"\(user)\" backs off after failed logins from 192.0.2.10"),
                    .send(c, .rateLimited("too many failed logins as \(user) from 192.0.2.10, retry in 4 s", retryAfter: .seconds(4))), .close(c),
                ])
        }
        var later = client("alice", password: "correct horse")
        guard case .registered? = login(&later, to: &core, stored: verifier, now: t0 + .seconds(4)).step else {
            return XCTFail("after the wait, the right password logs in")
        }
    }

    /// A guesser at another address sends six wrong proofs for alice at
    /// once, then one every 5 s for 60 s; alice, logging in from her own address half a second
    /// after each, gets in every time, and the guesser is slowed down.
    func testAGuesserElsewhereDoesNotKeepTheOwnerOut() {
        var core = relayCore()
        let guesser = address("198.51.100.66", 40_000)
        func guess(at now: NIODeadline) -> [RelayAction] {
            var guess = client("alice", password: "guess")
            return login(&guess, to: &core, stored: verifier, from: guesser, now: now).actions
        }
        for _ in 0..<5 { _ = guess(at: t0) }
        var slowed = 0
        for second in stride(from: 0, through: 60, by: 5) {
            let now = t0 + .seconds(Int64(second))
            if case .reject(.loginRateLimited, _)? = guess(at: now).first { slowed += 1 }
            var alice = client("alice", password: "correct horse")
            let result = login(&alice, to: &core, stored: verifier, now: now + .milliseconds(500))
            guard case .registered? = result.step else { return XCTFail("at \(second) s alice was refused: \(result.actions)") }
            _ = core.closed(result.connection)
        }
        XCTAssertGreaterThan(slowed, 0, "the guesser waits")
    }

    /// Guessing spread over many addresses makes the name wait at addresses it has not logged
    /// in from; where the owner logged in lately he is not kept waiting, and his login does not
    /// clear the count.
    func testGuessesFromManyAddressesSlowNewAddressesButNotTheOwners() {
        var core = relayCore { $0.loginBackoff.perName = LoginBackoff.Policy(freeFailures: 3, firstDelay: .seconds(10)) }
        var before = client("alice", password: "correct horse")
        let first = login(&before, to: &core, stored: verifier)
        guard case .registered? = first.step else { return XCTFail("alice logs in from home") }
        _ = core.closed(first.connection)
        for index in 1...4 {
            var guess = client("alice", password: "guess")
            let guessed = login(&guess, to: &core, stored: verifier, from: address("198.51.100.\(index)", 40_000))
            XCTAssertEqual(guessed.actions.first.map { if case .reject(.authFailed, _) = $0 { true } else { false } }, true, "\(index)")
        }

        var atHome = client("alice", password: "correct horse")
        let home = login(&atHome, to: &core, stored: verifier, now: t0 + .seconds(1))
        var elsewhere = client("alice", password: "correct horse")
        let away = login(&elsewhere, to: &core, stored: verifier, from: address("203.0.113.7", 40_000), now: t0 + .seconds(2))

        guard case .registered? = home.step else { return XCTFail("from her recent address alice gets in: \(home.actions)") }
        let c = away.connection
        XCTAssertEqual(
            away.actions,
            [
                .reject(.loginRateLimited, detail: "\(c): \"alice\" backs off after failed logins from addresses it has not logged in from"),
                .send(
                    c,
                    .rateLimited(
                        "too many failed logins as alice from addresses it has not logged in from, retry in 8 s",
                        retryAfter: .seconds(8))),
                .close(c),
            ])
    }

    func testDecoyIterationCountsFollowRealUsersAndStayPutForOneName() {
        let secret = Array("a decoy secret of thirty-two by.".utf8)
        let counts: [UInt32: Int] = [4096: 30, 100_000: 60, 250_000: 10]
        var drawn: [UInt32: Int] = [:]
        for index in 0..<3000 {
            let iterations = LoginVerification.decoyIterations(for: "ghost\(index)", secret: secret, counts: counts)
            XCTAssertEqual(iterations, LoginVerification.decoyIterations(for: "ghost\(index)", secret: secret, counts: counts))
            drawn[iterations, default: 0] += 1
        }
        XCTAssertEqual(Set(drawn.keys), Set(counts.keys))
        for (iterations, users) in counts {
            XCTAssertEqual(Double(drawn[iterations]!) / 3000, Double(users) / 100, accuracy: 0.04, "\(iterations)")
        }
        XCTAssertEqual(LoginVerification.decoyIterations(for: "ghost", secret: secret, counts: [:]), PasswordVerifier.defaultIterations)
    }

    func testARecordedLoginCannotBeReplayed() {
        var core = relayCore()
        var alice = client("alice", password: "correct horse")
        let first = ConnectionID(100)
        _ = core.open(first, peer: peer)
        let auth = alice.beginLogin(udpPort: 5000)
        XCTAssertEqual(core.control(auth, on: first, peer: peer), [.store(.fetchVerifier(user: "alice", connection: first, host: "192.0.2.10"))])
        let challenged = core.answer(.fetchVerifier(connection: first, verifier))
        guard challenged.count == 1, case .send(first, let challenge) = challenged[0],
            case .send(let recordedConnect)? = alice.loginReceived(challenge, now: t0)
        else { return XCTFail("\(challenged)") }

        // An eavesdropper replays AUTH and the recorded CONNECT on its own connection.
        let replay = ConnectionID(101)
        _ = core.open(replay, peer: peer)
        _ = core.control(auth, on: replay, peer: peer)
        _ = core.answer(.fetchVerifier(connection: replay, verifier))
        let actions = core.control(recordedConnect, on: replay, peer: peer)

        XCTAssertEqual(actions, authFailed("alice", on: replay), "the relay's nonce differs, so the old proof fails")
    }

    func testAFailedVerifierFetchIsToldAndTheLoginMayStartOver() {
        var core = relayCore()
        var alice = client("alice", password: "correct horse")
        let connection = ConnectionID(1)
        _ = core.open(connection, peer: peer)
        let auth = alice.beginLogin(udpPort: 5000)
        let fetch = StoreRequest.fetchVerifier(user: "alice", connection: connection, host: "192.0.2.10")
        XCTAssertEqual(core.control(auth, on: connection, peer: peer), [.store(fetch)])
        XCTAssertEqual(
            core.fail(fetch, StoreFailure("down")),
            [
                .reject(.registryUnavailable, detail: "verifier lookup for c1 failed: down"),
                .send(connection, .error(.internal, "registry unavailable, try again")),
            ])
        XCTAssertEqual(core.control(auth, on: connection, peer: peer), [.store(fetch)], "AUTH again")
    }

    func testConnectWithoutLoginIsRefusedWhenLoginIsRequired() {
        var core = relayCore()
        let connection = ConnectionID(1)
        _ = core.open(connection, peer: peer)

        let actions = core.control(DevRelay.connectMessage("alice", udpPort: 5000), on: connection, peer: peer)

        XCTAssertEqual(
            actions,
            [
                .reject(.authRequired, detail: "CONNECT without login on c1"),
                .send(connection, .error(.authRequired, "this relay requires a login: send AUTH first")),
            ])
        XCTAssertFalse(core.core.isConnected("alice"))
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
        var results: [[RelayAction]] = []
        for _ in 0..<4 {
            var mallory = client("alice", password: "guess")
            results.append(login(&mallory, to: &core, stored: verifier).actions)
        }
        let c4 = ConnectionID(4)
        XCTAssertEqual(
            results,
            [
                authFailed("alice", on: ConnectionID(1)), authFailed("alice", on: ConnectionID(2)), authFailed("alice", on: ConnectionID(3)),
                [
                    .reject(.loginRateLimited, detail: "c4 from 192.0.2.10"),
                    .send(c4, .rateLimited("too many login attempts from 192.0.2.10, retry in 10 s", retryAfter: .seconds(10))), .close(c4),
                ],
            ])
        var other = client("alice", password: "correct horse")
        guard case .registered? = login(&other, to: &core, stored: verifier, from: address("198.51.100.7", 1)).step else {
            return XCTFail("another address is not limited")
        }
    }

    func testConnectionsFromOneAddressAreRateLimited() {
        var core = relayCore { $0.connectionLimit = RateLimit(perSecond: 1, burst: 2) }
        let verdicts = (1...3).map { core.open(ConnectionID($0), peer: peer) }
        let c3 = ConnectionID(3)
        XCTAssertEqual(
            verdicts,
            [
                [], [],
                [
                    .reject(.connectionRateLimited, detail: "c3 from 192.0.2.10"),
                    .send(c3, .rateLimited("too many connections from 192.0.2.10, retry in 1 s", retryAfter: .seconds(1))), .close(c3),
                ],
            ])
    }

    func testTooManyConnectionsFromOneAddressAreRefusedUntilOneCloses() {
        var core = relayCore { $0.maxConnectionsPerHost = 2 }
        XCTAssertEqual(core.open(ConnectionID(1), peer: peer), [])
        XCTAssertEqual(core.open(ConnectionID(2), peer: peer), [])
        let c3 = ConnectionID(3)
        XCTAssertEqual(
            core.open(c3, peer: peer),
            [
                .reject(.connectionRateLimited, detail: "c3 from 192.0.2.10"),
                .send(c3, .rateLimited("too many connections from 192.0.2.10, retry in 1 s", retryAfter: .seconds(1))), .close(c3),
            ])
        _ = core.closed(c3)
        _ = core.closed(ConnectionID(1))
        XCTAssertEqual(core.open(ConnectionID(4), peer: peer), [])
    }
}
