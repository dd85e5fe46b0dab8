import NIOCore
import SIMPCore
import XCTest

/// What the client core decides and says about its connection (`ClientConnectionWording`), in
/// virtual time: the "without TLS" warning once per client (not at reconnects, nor for a relay on
/// this machine), a failed TLS handshake counted as an unreachable relay and named with why, and
/// the wording of each stop.
final class ClientConnectionWordingTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
    private let keys = SessionKeys(sessionId: 42, secret: Array(repeating: 7, count: 32))

    private func session(relays: [String]) -> ClientSession {
        var configuration = ClientSession.Configuration(user: "alice", firstMessageId: 100)
        configuration.relays = relays
        configuration.reconnect = ReconnectPolicy()
        configuration.loginTimeout = .seconds(5)
        return ClientSession(configuration: configuration)
    }

    /// Two remote relays without TLS: the warning names the first, once; the failover to the
    /// second, the login timing out there and the reconnect after a loss say nothing more.
    func testTheWarningWithoutTLSIsGivenOnceAcrossFailoverAndReconnects() {
        var client = session(relays: ["a.example:7000", "b.example:7000"])
        client.lifecycle.firstConnectStarted()
        XCTAssertEqual(
            client.lifecycle.connecting(host: "a.example", usesTLS: false),
            "connecting to a.example:7000 without TLS: the login and control frames cross the network in clear "
                + "(use --tls, with --ca if the relay's certificate is not from a public CA)")
        let deadline = client.lifecycle.loginStarted(now: t0)
        XCTAssertTrue(client.lifecycle.loginTimedOut(now: deadline))
        XCTAssertEqual(
            client.lifecycle.firstConnectFailed(.timedOut(what: "waiting for the relay to accept the login")),
            .tryNext(relay: 1, unreachable: "a.example:7000 (timed out waiting for the relay to accept the login)"))
        XCTAssertNil(client.lifecycle.connecting(host: "b.example", usesTLS: false), "said once per client")
        client.lifecycle.firstConnectEnded()
        _ = client.registered(keys: keys, now: deadline + .seconds(1))

        XCTAssertEqual(client.connectionLost(random: 0.5).step, .reconnect(failover: .init(from: 1, to: 0)))
        XCTAssertNil(client.lifecycle.connecting(host: "a.example", usesTLS: false), "not again at the reconnect")
        XCTAssertTrue(client.lifecycle.warnedWithoutTLS)
    }

    func testNoWarningWithTLSOrForARelayOnThisMachine() {
        for host in ["127.0.0.1", "127.5.0.1", "localhost", "::1"] {
            var lifecycle = ConnectionLifecycle(relays: ["\(host):7000"], loginTimeout: .seconds(5))
            XCTAssertNil(lifecycle.connecting(host: host, usesTLS: false), host)
            XCTAssertFalse(lifecycle.warnedWithoutTLS)
        }
        var withTLS = ConnectionLifecycle(relays: ["a.example:7000"], loginTimeout: .seconds(5))
        XCTAssertNil(withTLS.connecting(host: "a.example", usesTLS: true))
        XCTAssertNotNil(withTLS.connecting(host: "a.example", usesTLS: false), "a client without TLS is still told, once")
        XCTAssertFalse(ConnectionLifecycle.isLoopback("128.0.0.1"))
        XCTAssertFalse(ConnectionLifecycle.isLoopback("localhost.example"))
    }

    /// A handshake that fails on the first relay: it counts as unreachable, so the next is
    /// tried, and when every one failed the connect names each with why.
    func testAFailedTLSHandshakeCountsAsAnUnreachableRelayAndSaysWhy() {
        var lifecycle = ConnectionLifecycle(relays: ["a.example:7000", "b.example:7000"], loginTimeout: .seconds(5))
        lifecycle.firstConnectStarted()
        let untrusted = lifecycle.tlsFailed(.handshake(error: "certificate verify failed"), host: "a.example", trustedCA: "/etc/simp/ca.pem")
        XCTAssertEqual(
            untrusted,
            .cannotConnect(
                relayAndReason: "TLS with a.example:7000 failed: the relay's certificate is not valid for a.example "
                    + "or not signed by the CA in /etc/simp/ca.pem, or the relay does not speak TLS (certificate verify failed)"))
        guard case .tryNext(relay: 1, unreachable: let first?) = lifecycle.firstConnectFailed(untrusted) else {
            return XCTFail("the next relay is tried")
        }

        let misnamed = lifecycle.tlsFailed(.nameMismatch(detail: "the certificate names only c.example"), host: "b.example", trustedCA: nil)
        XCTAssertEqual(misnamed, .cannotConnect(relayAndReason: "TLS with b.example:7000 failed: the certificate names only c.example"))
        XCTAssertEqual(
            lifecycle.firstConnectFailed(misnamed),
            .fail(unreachable: [first, "TLS with b.example:7000 failed: the certificate names only c.example"]))

        let system = ConnectionLifecycle(relays: ["a.example:7000"], loginTimeout: .seconds(5))
        guard case .cannotConnect(let text) = system.tlsFailed(.handshake(error: "x"), host: "a.example", trustedCA: nil) else { return XCTFail() }
        XCTAssertTrue(text.contains("not signed by the system's trusted CAs"), text)
    }

    /// What each stop says, as the session reached it.
    func testEachStopSaysWhyAndWhatToDo() {
        var replaced = session(relays: ["a.example:7000"])
        _ = replaced.registered(keys: keys, now: t0)
        _ = replaced.controlReceived(.error(.alreadyConnected, "a newer session took over"), now: t0)
        guard case .stop(let takenOver) = replaced.connectionLost(random: 0.5).step else { return XCTFail("stopped") }
        XCTAssertEqual(takenOver.explanation(device: "laptop", tokens: .none), "another session of device laptop took over; not reconnecting")
        XCTAssertEqual(takenOver.explanation(device: "", tokens: .none), "another session of device (default) took over; not reconnecting")

        var expired = session(relays: ["a.example:7000"])
        _ = expired.registered(keys: keys, now: t0)
        _ = expired.controlReceived(.error(.tokenSessionExpired, "your access token expired"), now: t0 + .seconds(3600))
        guard case .stop(let tokenExpired) = expired.connectionLost(random: 0.5).step else { return XCTFail("stopped") }
        let advice = [ClientSession.Stop.TokenRenewal.none, .file, .command].map { tokenExpired.explanation(device: "", tokens: $0) }
        XCTAssertEqual(
            advice,
            [
                "the relay ended the session: your access token expired. Not reconnecting: get a new token (SIMP_TOKEN, or --token-command so simp renews it itself), then start simp again",
                "the relay ended the session: your access token expired. Not reconnecting: put a valid token in the --token-file, then start simp again",
                "the relay ended the session: your access token expired. Not reconnecting: check that --token-command still prints a valid token, then start simp again",
            ])

        XCTAssertEqual(
            ClientSession.Stop.loginRefused(reason: "login failed: wrong password").explanation(device: "", tokens: .none),
            "login refused: wrong password; not reconnecting")
    }
}
