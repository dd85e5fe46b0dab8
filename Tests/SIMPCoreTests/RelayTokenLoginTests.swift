import Foundation
import NIOCore
import SIMPCore
import SIMPCoreTestKit
import SIMPTokens
import XCTest

/// The relay core's access-token decisions (docs/PROTOCOL.md §4.9) in virtual time: the wall
/// clock is anchored at `wall0` when the monotonic clock reads `DevRelay.t0`, and tokens are
/// real JWTs signed with a key of a real JWKS.
final class RelayTokenLoginTests: XCTestCase {
    static let wall0: Int64 = 1_800_000_000_000
    let c1 = ConnectionID(1)
    var privateJWK = ""
    var verifier: JWKSVerifier!

    override func setUp() async throws {
        let pair = try TokenMint.keyPair(kid: "k1")
        privateJWK = pair.privateJWK
        verifier = try await JWKSVerifier.load(jwks: Data(pair.publicJWKS.utf8))
    }

    /// A token for `user`, issued `issuedAt` ms after wall0 and valid for `ttl` ms.
    func token(_ user: String, issuedAt: Int64 = 0, ttl: Int64 = 60_000, audience: String = "simp", key: String? = nil) async throws -> String {
        let issued = Date(timeIntervalSince1970: Double(Self.wall0 + issuedAt) / 1000)
        let claims = TokenMint.Claims(subject: user, audience: audience, issuedAt: issued, expires: issued.addingTimeInterval(Double(ttl) / 1000))
        return try await TokenMint.issue(claims, privateJWK: key ?? privateJWK)
    }

    func relay(loopbackOnly: Bool = false) -> DevRelay {
        var relay = DevRelay { configuration in
            configuration.requireLogin = true
            configuration.tokens = AccessTokenPolicy(audience: "simp", leewayMillis: 0, verifier: self.verifier, loopbackOnly: loopbackOnly)
        }
        relay.core.anchorWallClock(Self.wall0, at: DevRelay.t0)
        return relay
    }

    func connect(_ user: String, token: String) -> SIMPMessage {
        var connect = DevRelay.connectMessage(user, udpPort: 5000)
        connect.token = token
        return connect
    }

    /// Logs bob in with `token` on c1 and returns the CONNECTED he got.
    func logIn(_ relay: inout DevRelay, token: String) throws -> SIMPMessage {
        _ = relay.open(c1)
        XCTAssertEqual(
            relay.control(connect("bob", token: token), on: c1), [.store(.fetchVerifier(user: "bob", connection: c1, host: "127.0.0.1"))])
        let accepted = relay.answer(.fetchVerifier(connection: c1, nil))
        XCTAssertEqual(accepted.last, .store(.register(relay.registration("bob", on: c1, port: 5000), connection: c1)))
        let completed = try relay.complete("bob", on: c1, port: 5000)
        guard case .send(_, let connected)? = completed.first else { throw XCTSkip("no CONNECTED") }
        return connected
    }

    func testAValidTokenLogsInAndTheSessionEndsWhenItExpires() async throws {
        var relay = relay()
        let valid = try await token("bob")
        let connected = try logIn(&relay, token: valid)
        XCTAssertEqual(connected.tokenExpires, Self.wall0 + 60_000)
        XCTAssertEqual(connected.sessionSecret.count, 32)
        XCTAssertLessThanOrEqual(relay.core.nextDeadline, DevRelay.t0 + .seconds(60))
        XCTAssertFalse(relay.tick(now: DevRelay.t0 + .seconds(59)).contains { if case .close = $0 { true } else { false } })
        let ended = relay.tick(now: DevRelay.t0 + .seconds(60))
        XCTAssertTrue(ended.contains(.close(c1)))
        XCTAssertEqual(ended.first, .event(.userDisconnected(relay.registration(of: "bob"), .tokenExpired)), "reported with its reason")
        let error = ended.compactMap { if case .send(c1, let message) = $0 { message } else { nil } }.first
        XCTAssertEqual(error?.errorCode, .tokenSessionExpired)
        XCTAssertEqual(error?.errorText, "your access token expired 0 s ago and no new one came: the session ended; log in again with a new token")
        XCTAssertFalse(relay.core.isConnected("bob"))
    }

    /// The store's answer to a token login comes after its connection closed: no session starts.
    func testATokenLoginAnsweredAfterTheConnectionClosedStartsNoSession() async throws {
        var relay = relay()
        let valid = try await token("bob")
        _ = relay.open(c1)
        XCTAssertEqual(
            relay.control(connect("bob", token: valid), on: c1), [.store(.fetchVerifier(user: "bob", connection: c1, host: "127.0.0.1"))])
        XCTAssertEqual(relay.closed(c1), [])
        XCTAssertEqual(relay.answer(.fetchVerifier(connection: c1, nil)), [], "nothing for a closed connection: no register, no CONNECTED")
        XCTAssertFalse(relay.core.isConnected("bob"))
        XCTAssertEqual(relay.core.openConnections, 0)
    }

    func testARefreshOnTheSameConnectionMovesTheExpiry() async throws {
        var relay = relay()
        let valid = try await token("bob")
        _ = try logIn(&relay, token: valid)
        var refresh = SIMPMessage(kind: .tokenRefresh, messageId: 7, fromUser: "bob")
        refresh.token = try await token("bob", issuedAt: 30_000, ttl: 90_000)
        let at30 = DevRelay.t0 + .seconds(30)
        XCTAssertEqual(relay.control(refresh, on: c1, now: at30), [.store(.fetchVerifier(user: "bob", connection: c1, host: "127.0.0.1"))])
        var answer = SIMPMessage(kind: .tokenRefresh, messageId: 7, toUser: "bob")
        answer.tokenExpires = Self.wall0 + 120_000
        XCTAssertEqual(relay.answer(.fetchVerifier(connection: c1, nil), now: at30), [.send(c1, answer)])
        XCTAssertEqual(relay.tick(now: DevRelay.t0 + .seconds(61)).filter { $0 == .close(c1) }, [])
        XCTAssertTrue(relay.core.isConnected("bob"))
        XCTAssertTrue(relay.tick(now: DevRelay.t0 + .seconds(120)).contains(.close(c1)))
    }

    func testARefreshForAnotherUserIsRefusedAndTheSessionKeepsItsExpiry() async throws {
        var relay = relay()
        let valid = try await token("bob")
        _ = try logIn(&relay, token: valid)
        var refresh = SIMPMessage(kind: .tokenRefresh, messageId: 8, fromUser: "bob")
        refresh.token = try await token("alice", ttl: 600_000)
        let actions = relay.control(refresh, on: c1, now: DevRelay.t0 + .seconds(10))
        XCTAssertEqual(
            actions.last, .send(c1, .error(.tokenRefused, "access token refused: it is for another user than bob", messageId: 8)))
        XCTAssertTrue(relay.tick(now: DevRelay.t0 + .seconds(60)).contains(.close(c1)))
    }

    /// The ERROR a token login gets, and that the connection closes.
    func refusal(_ token: String, as user: String = "bob", relay: DevRelay? = nil, peer: SocketAddress? = nil) -> SIMPMessage? {
        var relay = relay ?? self.relay()
        _ = relay.open(c1, peer: peer)
        let actions = relay.control(connect(user, token: token), on: c1, peer: peer)
        XCTAssertEqual(actions.last, .close(c1))
        return actions.compactMap { if case .send(c1, let message) = $0 { message } else { nil } }.first
    }

    func testEachRefusedTokenHasItsOwnError() async throws {
        let expired = refusal(try await token("bob", issuedAt: -120_000, ttl: 60_000))
        XCTAssertEqual(expired?.errorCode, .tokenExpired)
        XCTAssertEqual(expired?.errorText, "access token expired 60 s ago: get a new one")
        let early = refusal(try await token("bob", issuedAt: 3_600_000))
        XCTAssertEqual(early?.errorText, "access token not valid yet (valid in 60 min): is this computer's clock right?")
        let audience = refusal(try await token("bob", audience: "another-service"))
        XCTAssertEqual(audience?.errorText, "access token refused: it is meant for another service (wrong audience)")
        let otherUser = refusal(try await token("bob"), as: "alice")
        XCTAssertEqual(otherUser?.errorText, "access token refused: it is for another user than alice")
        let stranger = try TokenMint.keyPair(kid: "k1").privateJWK // same kid, another key
        let forged = try await token("bob", key: stranger)
        XCTAssertEqual(refusal(forged)?.errorText, "access token refused: its signature is wrong")
        let unknown = try await token("bob", key: try TokenMint.keyPair(kid: "k9").privateJWK)
        XCTAssertEqual(refusal(unknown)?.errorText, "access token refused: signed with a key this relay does not know")
        XCTAssertEqual(refusal("not.a.jwt")?.errorText, "access token refused: not a JWT this relay can read")
        for error in [expired, early, audience, otherUser] { XCTAssertNotEqual(error?.errorCode, SIMPMessage.ErrorCode.none) }
    }

    func testATokenIssuedBeforeTheOperatorsDenyTimeIsRefused() async throws {
        var relay = relay()
        _ = relay.open(c1)
        let valid = try await token("bob")
        _ = relay.control(connect("bob", token: valid), on: c1)
        let actions = relay.answer(.fetchVerifier(connection: c1, nil, tokensDeniedBefore: Self.wall0 + 1000))
        XCTAssertTrue(
            actions.contains(
                .send(c1, .error(.tokenRefused, "access token refused: the relay's operator revoked tokens issued before it; get a new one"))))
        XCTAssertEqual(actions.last, .close(c1))
    }

    func testPlainTCPFromAfarIsRefusedUnlessAllowed() async throws {
        let far = try SocketAddress(ipAddress: "192.0.2.7", port: 40_001)
        let error = refusal(try await token("bob"), relay: relay(loopbackOnly: true), peer: far)
        XCTAssertEqual(error?.errorCode, .tokenNotAccepted)
        var allowed = relay(loopbackOnly: false)
        _ = allowed.open(c1, peer: far)
        let valid = try await token("bob")
        XCTAssertEqual(
            allowed.control(connect("bob", token: valid), on: c1, peer: far),
            [.store(.fetchVerifier(user: "bob", connection: c1, host: "192.0.2.7"))])
    }

    func testRefusedTokensCountAsFailedLoginsForTheBackoff() async throws {
        var relay = relay()
        let wrong = try await token("bob", audience: "elsewhere")
        for n in 1...6 { // after 5 failures in a row, each further one makes the name wait
            let connection = ConnectionID(UInt64(n))
            _ = relay.open(connection, peer: DevRelay.peer(of: c1))
            XCTAssertEqual(relay.control(connect("bob", token: wrong), on: connection, peer: DevRelay.peer(of: c1)).last, .close(connection))
        }
        let seventh = ConnectionID(7)
        _ = relay.open(seventh, peer: DevRelay.peer(of: c1))
        let valid = try await token("bob")
        let actions = relay.control(connect("bob", token: valid), on: seventh, peer: DevRelay.peer(of: c1))
        let error = actions.compactMap { if case .send(seventh, let message) = $0 { message } else { nil } }.first
        XCTAssertEqual(error?.errorCode, .rateLimited)
        XCTAssertEqual(error?.errorText.hasPrefix("too many failed logins as bob from 127.0.0.1"), true)
    }

    func testARelayWithoutKeysTakesNoTokens() async throws {
        var relay = DevRelay { $0.requireLogin = true }
        _ = relay.open(c1)
        let valid = try await token("bob")
        XCTAssertEqual(
            relay.control(connect("bob", token: valid), on: c1).last,
            .send(c1, .error(.tokenNotAccepted, "this relay takes no access tokens: log in with a password")))
    }
}
