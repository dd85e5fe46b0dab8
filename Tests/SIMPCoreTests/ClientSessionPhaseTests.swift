import NIOCore
import SIMPCore
import XCTest

/// `ClientSession.phase`: what each phase holds, and that it ends with the phase.
final class ClientSessionPhaseTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
    private let keys = SessionKeys(sessionId: 42, secret: Array(repeating: 7, count: 32))

    private func session() -> ClientSession {
        var configuration = ClientSession.Configuration(user: "alice", firstMessageId: 100, password: "correct horse")
        configuration.keepaliveInterval = .seconds(10)
        configuration.helloAttempts = 2
        configuration.reconnect = ReconnectPolicy()
        return ClientSession(configuration: configuration)
    }

    func testALoginHoldsItsPortUntilTheRelayAnswersThenTheRegistrationHoldsTheTimers() throws {
        var client = session()
        XCTAssertEqual(client.phase, .disconnected)
        _ = client.beginLogin(udpPort: 5000)
        guard case .loggingIn(let attempt) = client.phase else { return XCTFail("\(client.phase)") }
        XCTAssertEqual(attempt.udpPort, 5000)
        XCTAssertNil(attempt.transcript, "no CHALLENGE answered yet")
        XCTAssertFalse(client.isRegistered)

        _ = client.registered(keys: keys, now: t0)
        let registered = try XCTUnwrap(client.phase.registration)
        XCTAssertEqual(registered.nextKeepalive, t0 + .seconds(10))
        XCTAssertEqual(registered.nextHello?.attemptsLeft, 1, "the first HELLO went at once")
        XCTAssertEqual(registered.nextHello?.due, t0 + client.configuration.helloInterval)
        XCTAssertNil(registered.receiptConfirmPing)
        XCTAssertTrue(client.isRegistered)

        _ = client.poll(now: t0 + client.configuration.helloInterval)
        XCTAssertNil(client.phase.registration?.nextHello, "the last HELLO went")
    }

    func testALostConnectionLeavesNoTimerOfTheRegistration() {
        var client = session()
        _ = client.registered(keys: keys, now: t0)
        XCTAssertEqual(client.nextDeadline, t0 + client.configuration.helloInterval)
        _ = client.controlLost(mayReconnect: true, random: 0.5)
        XCTAssertEqual(client.phase, .disconnected)
        XCTAssertNil(client.nextDeadline, "no heartbeat, keepalive or HELLO without a control connection")
        XCTAssertNil(client.stopped)
    }

    func testARefusedLoginEndsTheAttemptAndStopsTheSession() {
        var client = session()
        _ = client.beginLogin(udpPort: 5000)
        let refused = client.loginReceived(.error(.authFailed, "wrong password"), now: t0)
        guard case .refused(.authFailed, "wrong password")? = refused else { return XCTFail("\(String(describing: refused))") }
        XCTAssertEqual(client.phase, .disconnected)
        XCTAssertEqual(client.stopped, .loginRefused(reason: "wrong password"))
        XCTAssertNil(client.loginReceived(.error(.authFailed, "again"), now: t0), "no login in progress: ignored")
    }
}
