import NIOCore
import SIMPCore
import XCTest

/// The client core's side of access tokens (docs/PROTOCOL.md §4.9): the login is one CONNECT
/// carrying the token, CONNECTED's secret keys the session, a refused token stops reconnecting,
/// the relay's end at expiry stops the session, and renewals are planned from `exp`.
final class ClientTokenLoginTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    private func session() -> ClientSession {
        var configuration = ClientSession.Configuration(user: "bob", firstMessageId: 100)
        configuration.reconnect = ReconnectPolicy()
        configuration.device = "phone"
        return ClientSession(configuration: configuration)
    }

    func testATokenLoginIsOneConnectAndConnectedsSecretKeysTheSession() throws {
        var client = session()
        let connect = client.beginLogin(udpPort: 5000, token: "header.claims.signature")
        var expected = SIMPMessage(kind: .connect, fromUser: "bob")
        expected.udpPort = 5000
        expected.acceptsBatchReceipts = true
        expected.token = "header.claims.signature"
        expected.device = "phone"
        XCTAssertEqual(connect, expected)

        var connected = SIMPMessage(kind: .connected, toUser: "bob")
        connected.sessionId = 42
        connected.sessionSecret = Array(repeating: 9, count: 32)
        connected.tokenExpires = 1_800_000_060_000
        guard case .registered(let accepted, _)? = client.loginReceived(connected, now: t0) else { return XCTFail("not registered") }
        XCTAssertEqual(accepted.tokenExpires, 1_800_000_060_000)
        XCTAssertTrue(client.isRegistered)

        let refresh = client.tokenRefresh("new.token.here")
        XCTAssertEqual(refresh.kind, .tokenRefresh)
        XCTAssertEqual(refresh.token, "new.token.here")
        XCTAssertNotEqual(refresh.messageId, client.tokenRefresh("another").messageId, "each refresh has its own id")
    }

    func testAConnectedWithoutASecretIsRefused() {
        var client = session()
        _ = client.beginLogin(udpPort: 5000, token: "t")
        guard case .refused(.authFailed, _)? = client.loginReceived(SIMPMessage(kind: .connected, toUser: "bob"), now: t0) else {
            return XCTFail("a CONNECTED without the session secret was taken")
        }
    }

    func testARefusedTokenStopsReconnectingAndAnExpiredSessionStopsTheSession() {
        for code in [SIMPMessage.ErrorCode.tokenRefused, .tokenExpired, .tokenNotAccepted] {
            var client = session()
            _ = client.beginLogin(udpPort: 5000, token: "t")
            _ = client.loginReceived(.error(code, "why"), now: t0)
            XCTAssertEqual(client.stopped, .loginRefused(reason: "why"), "\(code)")
        }
        var client = session()
        _ = client.registered(keys: SessionKeys(sessionId: 1, secret: Array(repeating: 1, count: 32)), now: t0)
        _ = client.controlReceived(.error(.tokenSessionExpired, "your access token expired"), now: t0)
        XCTAssertEqual(client.stopped, .tokenExpired(reason: "your access token expired"))
    }

    func testRenewalsComeWhenAThirdOfTheTimeLeftHasPassedAtMostAMinuteEarly() {
        XCTAssertEqual(AccessTokenRenewal.delay(expires: 6_000, nowMillis: 0), 4_000)
        XCTAssertEqual(AccessTokenRenewal.delay(expires: 3_600_000, nowMillis: 0), 3_540_000)
        XCTAssertEqual(AccessTokenRenewal.delay(expires: 1_000, nowMillis: 2_000), 0, "already expired: at once")
        XCTAssertEqual(AccessTokenRenewal.retryDelay(expires: 60_000, nowMillis: 0), 5_000)
        XCTAssertEqual(AccessTokenRenewal.retryDelay(expires: 2_000, nowMillis: 0), 1_000)
        XCTAssertNil(AccessTokenRenewal.retryDelay(expires: 0, nowMillis: 1))
    }
}
