import NIOCore
import SIMPCore
import SIMPCoreTestKit
import XCTest

/// A connection's phase, owned by `ConnectionTable` alone: the transition table, what each
/// transition does to the login counts and deadlines (in virtual time), and the core refusing
/// what comes for a phase the connection has left (a login answer after the close, a CONNECT on
/// a connection being closed).
final class ConnectionPhaseTests: XCTestCase {
    private let t0 = DevRelay.t0
    private let c1 = ConnectionID(1), c2 = ConnectionID(2)
    private let connected = SIMPMessage(kind: .connected, toUser: "alice")

    private var phases: [ConnectionTable.Phase] {
        [.awaitingLogin, .registering(user: "alice", session: 7, connected: connected), .connected(user: "alice", session: 7), .closing]
    }
    private var changes: [ConnectionTable.Change] {
        [.sessionStarted(user: "alice", session: 7, connected: connected), .registered, .registrationFailed, .closing]
    }

    func testEveryPhaseAndChangeLeadsWhereTheTableSaysAndNowhereElse() {
        let legal: [String: ConnectionTable.Phase] = [
            "0 0": .registering(user: "alice", session: 7, connected: connected),
            "0 3": .closing,
            "1 1": .connected(user: "alice", session: 7),
            "1 2": .awaitingLogin,
            "1 3": .closing,
            "2 3": .closing,
        ]
        for (p, phase) in phases.enumerated() {
            for (c, change) in changes.enumerated() {
                XCTAssertEqual(phase.after(change), legal["\(p) \(c)"], "\(phase) after \(change)")
            }
        }
        XCTAssertEqual(phases.map(\.session), [nil, 7, 7, nil])
        XCTAssertEqual(phases.map(\.isConnected), [false, false, true, false])
    }

    /// Only a connection awaiting a login counts as not logged in and has a live login deadline;
    /// one whose registration failed awaits a login again, with a deadline from then.
    func testTransitionsKeepTheCountsAndDeadlinesOfConnectionsNotLoggedIn() {
        var limits = RelayLimits()
        limits.loginTimeout = .seconds(10)
        var table = ConnectionTable(
            connectionLimit: RateLimit(perSecond: 100, burst: 100), maxConnectionsPerHost: 10, heartbeat: HeartbeatPolicy(interval: .seconds(120)),
            limits: limits)
        _ = table.open(c1, host: "10.0.0.1", now: t0)
        _ = table.open(c2, host: "10.0.0.1", now: t0)
        XCTAssertEqual(table.unauthenticated, 2)

        XCTAssertEqual(table.change(c1, changes[0], now: t0 + .seconds(1)), phases[1])
        XCTAssertEqual(table.session(on: c1), 7)
        XCTAssertEqual(table.unauthenticated, 1)
        XCTAssertNil(table.change(c1, .sessionStarted(user: "bob", session: 8, connected: connected), now: t0), "one session per connection")
        XCTAssertEqual(table.phase(of: c1), phases[1], "an illegal change changes nothing")

        XCTAssertEqual(table.change(c1, .registrationFailed, now: t0 + .seconds(3)), .awaitingLogin)
        XCTAssertEqual(table.unauthenticated, 2)
        XCTAssertNil(table.session(on: c1))
        XCTAssertEqual(table.pollLoginDeadlines(now: t0 + .seconds(10)), [c2], "c1's first deadline no longer counts")
        XCTAssertEqual(table.pollLoginDeadlines(now: t0 + .seconds(13) - .nanoseconds(1)), [])
        XCTAssertEqual(table.pollLoginDeadlines(now: t0 + .seconds(13)), [c1], "ten seconds from the failure")

        XCTAssertEqual(table.change(c2, .closing, now: t0), .closing)
        XCTAssertEqual(table.unauthenticated, 1, "a connection being closed is not waiting for a login")
        XCTAssertNil(table.change(c2, changes[0], now: t0), "a closing connection logs in no more")
        XCTAssertNil(table.change(c2, .closing, now: t0))
        XCTAssertNil(table.change(ConnectionID(9), .closing, now: t0), "not open")
        XCTAssertEqual(table.close(c2), .closing)
        XCTAssertEqual(table.close(c1), .awaitingLogin)
        XCTAssertEqual(table.unauthenticated, 0)
    }

    // MARK: In the core

    func testALoginAnswerAfterTheConnectionClosedChangesNothing() {
        var relay = DevRelay { $0.requireLogin = true }
        _ = relay.open(c1)
        var auth = SIMPMessage(kind: .auth, fromUser: "alice")
        auth.nonce = [UInt8](repeating: 1, count: 16)
        XCTAssertEqual(relay.control(auth, on: c1), [.store(.fetchVerifier(user: "alice", connection: c1, host: "127.0.0.1"))])
        XCTAssertEqual(relay.closed(c1), [])
        let verifier = PasswordVerifier.make(password: "pw", iterations: PasswordVerifier.minimumIterations)
        XCTAssertEqual(relay.answer(.fetchVerifier(connection: c1, verifier)), [], "no CHALLENGE to a closed connection")
        XCTAssertEqual(relay.core.openConnections, 0)
    }

    func testARegistrationAnsweredAfterTheSessionWasReplacedIsIgnored() throws {
        var relay = DevRelay()
        _ = relay.open(c1)
        let first = StoreRequest.register(relay.registration("alice", on: c1, port: 5001), connection: c1)
        XCTAssertEqual(relay.control(DevRelay.connectMessage("alice", udpPort: 5001), on: c1), [.store(first)])
        _ = relay.open(c2)
        let second = relay.control(DevRelay.connectMessage("alice", udpPort: 5002), on: c2)
        XCTAssertEqual(
            second.first, .send(c1, .error(.alreadyConnected, "alice connected again elsewhere (a newer session of this device took over)")),
            "\(second)")
        XCTAssertEqual(relay.answer(DevRelay.done(first)), [], "c1 is closing: no CONNECTED for the replaced session")
        XCTAssertEqual(relay.fail(first, StoreFailure("late")), [], "nor an error")
        try relay.complete("alice", on: c2, port: 5002)
        XCTAssertEqual(relay.core.sessions(of: "alice").map(\.session), ["r1/2"])
    }

    func testAConnectionBeingClosedIsNotReadAndCannotLogIn() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: c1, port: 5001)
        _ = relay.answer(.checkSession(user: "alice", session: "r1/1", current: RelayCore.sessionEndedByOperator))
        XCTAssertEqual(
            relay.control(DevRelay.connectMessage("alice", udpPort: 5001), on: c1),
            [.reject(.notConnected, detail: "\(SIMPMessage.Kind.connect) on c1, which is closing")])
        XCTAssertEqual(
            relay.control(SIMPMessage(kind: .who, messageId: 3), on: c1),
            [.reject(.notConnected, detail: "\(SIMPMessage.Kind.who) on c1, which is closing")])
        XCTAssertEqual(
            relay.run { $0.malformedControl(ByteBuffer(bytes: [0xFF]), on: c1, detail: "bad", now: t0, into: &$1) },
            [.reject(.malformed, detail: "c1, which is closing: bad")], "not answered either")
        XCTAssertFalse(relay.core.isConnected("alice"))
        XCTAssertEqual(relay.closed(c1), [], "its session was already ended")
        XCTAssertEqual(relay.core.openConnections, 0)
    }
}
