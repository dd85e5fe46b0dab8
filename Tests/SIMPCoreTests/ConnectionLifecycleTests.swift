import NIOCore
import SIMPCore
import XCTest

/// The client's connection lifecycle in the core (`ConnectionLifecycle`, `ClientSession+Lifecycle`),
/// in virtual time: which relay is tried and in what order, the backoff between attempts, when a
/// login has waited too long, which failures are final, and when the client stops.
final class ConnectionLifecycleTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
    private let keys = SessionKeys(sessionId: 42, secret: Array(repeating: 7, count: 32))
    private let relays = ["a.example:7000", "b.example:7000", "c.example:7000"]

    private func session(relays: [String]? = nil, reconnect: ReconnectPolicy? = ReconnectPolicy()) -> ClientSession {
        var configuration = ClientSession.Configuration(user: "alice", firstMessageId: 100)
        configuration.relays = relays ?? self.relays
        configuration.reconnect = reconnect
        configuration.loginTimeout = .seconds(5)
        return ClientSession(configuration: configuration)
    }

    // MARK: The first connect

    func testTheFirstConnectTriesEachRelayInTurnAndNamesEveryUnreachableOne() {
        var lifecycle = ConnectionLifecycle(relays: relays, loginTimeout: .seconds(5))
        lifecycle.firstConnectStarted()

        let first = lifecycle.firstConnectFailed(.cannotConnect(relayAndReason: "a.example:7000 (connection refused)"))
        let second = lifecycle.firstConnectFailed(.timedOut(what: "waiting for the relay to accept the login"))
        let third = lifecycle.firstConnectFailed(.cannotConnect(relayAndReason: "c.example:7000 (no route to host)"))

        XCTAssertEqual(first, .tryNext(relay: 1, unreachable: "a.example:7000 (connection refused)"))
        XCTAssertEqual(second, .tryNext(relay: 2, unreachable: "b.example:7000 (timed out waiting for the relay to accept the login)"))
        XCTAssertEqual(
            third,
            .fail(unreachable: [
                "a.example:7000 (connection refused)", "b.example:7000 (timed out waiting for the relay to accept the login)",
                "c.example:7000 (no route to host)",
            ]), "each relay tried once, then the connect fails naming them all")
    }

    func testAFirstConnectFailsWithTheLastErrorWhenItWasNotUnreachable() {
        var lifecycle = ConnectionLifecycle(relays: Array(relays.prefix(2)), loginTimeout: .seconds(5))
        lifecycle.firstConnectStarted()
        XCTAssertEqual(
            lifecycle.firstConnectFailed(.cannotConnect(relayAndReason: "a.example:7000 (refused)")),
            .tryNext(relay: 1, unreachable: "a.example:7000 (refused)"))
        XCTAssertEqual(lifecycle.firstConnectFailed(.other), .fail(unreachable: nil), "the second relay refused the login: its own error")

        var single = ConnectionLifecycle(relays: ["a.example:7000"], loginTimeout: .seconds(5))
        single.firstConnectStarted()
        XCTAssertEqual(
            single.firstConnectFailed(.cannotConnect(relayAndReason: "a.example:7000 (refused)")), .fail(unreachable: nil),
            "one relay: its error as it is")
    }

    func testAFirstConnectStopsTryingOnceTheUserClosed() {
        var lifecycle = ConnectionLifecycle(relays: relays, loginTimeout: .seconds(5))
        lifecycle.firstConnectStarted()
        lifecycle.userClosed()
        XCTAssertEqual(lifecycle.firstConnectFailed(.other), .fail(unreachable: nil))
        XCTAssertEqual(lifecycle.current, 0, "no relay tried after the close")
    }

    // MARK: Failover and backoff

    func testALostRelayIsFollowedByTheNextOneInOrderWithTheBackoffBetween() {
        var client = session()
        _ = client.registered(keys: keys, now: t0)

        let lost = client.connectionLost(random: 0.5)
        let second = client.connectFailed(random: 0.5)
        let third = client.connectFailed(random: 0.5)

        XCTAssertEqual(lost.step, .reconnect(failover: .init(from: 0, to: 1)))
        XCTAssertEqual(second.step, .reconnect(failover: .init(from: 1, to: 2)))
        XCTAssertEqual(third.step, .reconnect(failover: .init(from: 2, to: 0)), "after the last relay, the first again")
        XCTAssertEqual(
            [lost, second, third].map(\.output.reconnect), [1, 2, 4].enumerated().map { ReconnectPlan(attempt: $0 + 1, delay: .seconds($1)) },
            "0.5 is no jitter: 1, 2, 4 s")
        XCTAssertEqual(client.lifecycle.currentRelay, "a.example:7000")
    }

    func testOneRelayIsTriedAgainWithoutFailover() {
        var client = session(relays: ["a.example:7000"])
        _ = client.registered(keys: keys, now: t0)
        XCTAssertEqual(client.connectionLost(random: 0.5).step, .reconnect(failover: nil))
        XCTAssertEqual(client.connectFailed(random: 0.5).step, .reconnect(failover: nil))
        XCTAssertEqual(client.lifecycle.current, 0)
    }

    /// The jitter comes from the random numbers passed in: a seeded generator gives the same
    /// delays twice, each within ±20 % of 1, 2, 4 … capped at 30 s.
    func testTheBackoffWithASeededRandomReplaysAndStaysWithinItsJitter() {
        func delays(seed: UInt64) -> [TimeAmount] {
            var random = SplitMix64(seed: seed)
            var client = session()
            _ = client.registered(keys: keys, now: t0)
            var plans = [client.connectionLost(random: Double.random(in: 0..<1, using: &random)).output.reconnect]
            for _ in 1..<7 { plans.append(client.connectFailed(random: Double.random(in: 0..<1, using: &random)).output.reconnect) }
            return plans.map { $0?.delay ?? .zero }
        }
        let once = delays(seed: 7), again = delays(seed: 7), other = delays(seed: 8)

        XCTAssertEqual(once, again, "the same seed, the same delays")
        XCTAssertNotEqual(once, other, "another seed, other delays")
        for (delay, base) in zip(once, [1, 2, 4, 8, 16, 30, 30]) {
            let seconds = Double(delay.nanoseconds) / 1e9
            XCTAssert((0.8 * Double(base)...1.2 * Double(base)).contains(seconds), "\(seconds) s for \(base) s")
        }
    }

    // MARK: The login's deadline

    func testALoginTimesOutAtItsDeadlineOnce() {
        var lifecycle = ConnectionLifecycle(relays: relays, loginTimeout: .seconds(5))
        let deadline = lifecycle.loginStarted(now: t0)

        XCTAssertEqual(deadline, t0 + .seconds(5))
        XCTAssertFalse(lifecycle.loginTimedOut(now: t0 + .milliseconds(4999)))
        XCTAssertTrue(lifecycle.loginTimedOut(now: t0 + .seconds(5)))
        XCTAssertFalse(lifecycle.loginTimedOut(now: t0 + .seconds(6)), "a login times out once")
    }

    func testAnEndedLoginsTimerDoesNotTimeOutTheNextLogin() {
        var lifecycle = ConnectionLifecycle(relays: relays, loginTimeout: .seconds(5))
        _ = lifecycle.loginStarted(now: t0)
        lifecycle.loginEnded() // refused, or its connection closed
        XCTAssertFalse(lifecycle.loginTimedOut(now: t0 + .seconds(5)), "no login under way")

        let next = lifecycle.loginStarted(now: t0 + .seconds(3))
        XCTAssertFalse(lifecycle.loginTimedOut(now: t0 + .seconds(5)), "the first login's timer, during the second login")
        XCTAssertTrue(lifecycle.loginTimedOut(now: next))
    }

    // MARK: Final and retryable failures, stopping

    /// A login the relay refuses (bad password, locked account, too many devices) cannot
    /// succeed by trying again: the session stops and says why. A refused connection is
    /// tried again on the next relay.
    func testARefusedLoginIsFinalARefusedConnectionIsRetried() {
        for (code, reason) in [
            (SIMPMessage.ErrorCode.authFailed, "login failed: wrong password"),
            (.authFailed, "login failed: your account is locked by the relay's operator"), (.limitReached, "alice has 5 devices"),
        ] {
            var client = session()
            XCTAssertEqual(client.connectFailed(random: 0.5).step, .reconnect(failover: .init(from: 0, to: 1)), "a refused connection")
            _ = client.beginLogin(udpPort: 4000)
            _ = client.loginReceived(.error(code, reason), now: t0)
            let refused = client.connectFailed(random: 0.5)
            XCTAssertEqual(refused.step, .stop(.loginRefused(reason: reason)), reason)
            XCTAssertNil(refused.output.reconnect, reason)
            XCTAssertEqual(client.lifecycle.current, 1, "\(reason): no failover once stopped")
        }
        XCTAssertEqual(ConnectionLifecycle.refusalText("login failed: wrong password"), "login refused: wrong password; not reconnecting")
        XCTAssertEqual(ConnectionLifecycle.refusalText("alice has 5 devices"), "login refused: alice has 5 devices; not reconnecting")
    }

    func testATakenOverOrExpiredSessionStopsWhenItsConnectionCloses() {
        var replaced = session()
        _ = replaced.registered(keys: keys, now: t0)
        _ = replaced.controlReceived(.error(.alreadyConnected, "a newer session took over"), now: t0)
        let lost = replaced.connectionLost(random: 0.5)
        XCTAssertEqual(lost.step, .stop(.takenOver(reason: "a newer session took over")))
        XCTAssertNil(lost.output.reconnect)
        XCTAssertEqual(replaced.lifecycle.current, 0, "no failover")

        var expired = session()
        _ = expired.registered(keys: keys, now: t0)
        _ = expired.controlReceived(.error(.tokenSessionExpired, "your access token expired"), now: t0)
        XCTAssertEqual(expired.connectionLost(random: 0.5).step, .stop(.tokenExpired(reason: "your access token expired")))
    }

    func testWithoutAReconnectPolicyALostConnectionIsOffline() {
        var client = session(reconnect: nil)
        _ = client.registered(keys: keys, now: t0)
        let lost = client.connectionLost(random: 0.5)
        XCTAssertEqual(lost.step, .offline)
        XCTAssertNil(lost.output.reconnect)
    }

    func testAfterTheUserClosedNothingConnectsAgain() {
        var client = session()
        _ = client.registered(keys: keys, now: t0)
        client.userClosed()

        let lost = client.connectionLost(random: 0.5)

        XCTAssertEqual(lost.step, .closedByUser)
        XCTAssertNil(lost.output.reconnect)
        XCTAssertFalse(client.mayConnect, "a reconnect planned before the close does not go ahead")
        XCTAssertEqual(client.connectFailed(random: 0.5).step, .nothing)
        XCTAssertFalse(client.connectAgainRequested())
    }

    func testTheUserMayConnectAgainAfterAStopWithAFreshBackoff() {
        var client = session()
        XCTAssertFalse(client.connectAgainRequested(), "not stopped: it reconnects by itself")
        _ = client.registered(keys: keys, now: t0)
        _ = client.connectionLost(random: 0.5)
        _ = client.connectFailed(random: 0.5) // attempt 2
        _ = client.beginLogin(udpPort: 4000)
        _ = client.loginReceived(.error(.authFailed, "login failed: locked"), now: t0)
        XCTAssertEqual(client.connectFailed(random: 0.5).step, .stop(.loginRefused(reason: "login failed: locked")))

        XCTAssertTrue(client.connectAgainRequested())
        XCTAssertNil(client.stopped)
        XCTAssertEqual(client.connectFailed(random: 0.5).output.reconnect, ReconnectPlan(attempt: 1, delay: .seconds(1)), "the backoff starts afresh")
    }

    func testAConnectionClosedDuringTheLoginSaysWhyWithoutTLS() {
        let lifecycle = ConnectionLifecycle(relays: relays, loginTimeout: .seconds(5))
        XCTAssertEqual(
            lifecycle.closedDuringLogin(usesTLS: false),
            .cannotConnect(
                relayAndReason: "a.example:7000 closed the connection during the login (a relay that runs TLS does this to a client without --tls)"))
        XCTAssertEqual(lifecycle.closedDuringLogin(usesTLS: true), .other)
    }
}
