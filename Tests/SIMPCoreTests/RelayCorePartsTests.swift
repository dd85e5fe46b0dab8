import NIOCore
import SIMPCore
import SIMPCoreTestKit
import XCTest

/// The parts `RelayCore` composes, each on its own.
final class SessionTableTests: XCTestCase {
    private let t0 = DevRelay.t0
    private let secret = [UInt8](repeating: 7, count: 32)
    private var keys: SessionKeys { SessionKeys(sessionId: 42, secret: secret) }
    private let home = address("127.0.0.1", 5001)

    private func registration(_ user: String, _ token: String, device: String = "", receives: Bool = true) -> Registration {
        Registration(user: user, route: Route(address: home, relayId: "r1"), session: token, device: device, receives: receives)
    }

    private func table() -> SessionTable {
        var table = SessionTable()
        table.start(registration("alice", "r1/1"), keys: keys, on: ConnectionID(1))
        return table
    }

    func testSessionsAreFoundByUserDeviceAndConnection() {
        var table = table()
        XCTAssertTrue(table.contains("alice"))
        XCTAssertEqual(table.connections(of: "alice"), [ConnectionID(1)])
        XCTAssertEqual(table.connection(ofSession: 42), ConnectionID(1))
        XCTAssertEqual(table.receivingSession(of: "alice", device: ""), 42)
        XCTAssertTrue(table.isSoleReceiver("alice"))
        table.start(registration("alice", "r1/2", device: "phone"), keys: SessionKeys(sessionId: 43, secret: secret), on: ConnectionID(2))
        table.start(registration("alice", "r1/4", receives: false), keys: SessionKeys(sessionId: 44, secret: secret), on: ConnectionID(4))
        XCTAssertEqual(table.count, 1, "one user")
        XCTAssertEqual(table.connections(of: "alice"), [ConnectionID(1), ConnectionID(2), ConnectionID(4)])
        XCTAssertEqual(table.receivers(of: "alice"), [Recipient(user: "alice"), Recipient(user: "alice", device: "phone")])
        XCTAssertFalse(table.isSoleReceiver("alice"), "two receiving devices")
        table.start(registration("aaron", "r1/3"), keys: SessionKeys(sessionId: 45, secret: secret), on: ConnectionID(3))
        XCTAssertEqual(table.registrations.map(\.session), ["r1/3", "r1/1", "r1/2", "r1/4"], "by user, then token")
        XCTAssertEqual(table.end(43), registration("alice", "r1/2", device: "phone"))
        XCTAssertNil(table.end(43))
        XCTAssertTrue(table.isSoleReceiver("alice"), "the send-only session does not count")
        table.learned("alice", knownDevices: 2, elsewhere: true)
        XCTAssertFalse(table.isSoleReceiver("alice"), "another known device waits for alice's messages")
        XCTAssertTrue(table.isElsewhere("alice"))
        for id in [42, 44, 45] as [UInt64] { XCTAssertNotNil(table.end(id)) }
        XCTAssertEqual(table.count, 0)
    }

    func testDatagramsOpenOnlyWithTheirSessionsKeysAndOnce() throws {
        var table = table()
        var client = DatagramSealer(keys: keys, direction: .uplink)
        let message = textMessage(1, from: "alice", to: "bob")
        let sealed = client.seal(message)
        let opened = try table.open(sealed, from: home).get()
        XCTAssertEqual(opened.user, "alice")
        XCTAssertEqual(opened.payload, MessageCodec.encode(message))
        XCTAssertTrue(opened.isNewest)
        XCTAssertEqual(table.open(sealed, from: home), .failure(RelayRejection(.replayed, "session of alice from \(home)")))
        XCTAssertEqual(table.open(ByteBuffer(bytes: [1, 2]), from: home), .failure(RelayRejection(.unsealed, "2 bytes from \(home)")))
        var stranger = DatagramSealer(keys: SessionKeys(sessionId: 9, secret: secret), direction: .uplink)
        XCTAssertEqual(table.open(stranger.seal(message), from: home), .failure(RelayRejection(.unknownSession, "session 9 from \(home)")))
        var forger = DatagramSealer(keys: SessionKeys(sessionId: 42, secret: Array(repeating: 1, count: 32)), direction: .uplink)
        XCTAssertEqual(table.open(forger.seal(message), from: home), .failure(RelayRejection(.badMAC, "session of alice from \(home)")))
    }

    func testTheRouteFollowsANewAddressAndThrottleNoticesAreSpaced() throws {
        var table = table()
        var client = DatagramSealer(keys: keys, direction: .uplink)
        let same = try table.open(client.seal(textMessage(1, from: "alice", to: "bob")), from: home).get()
        XCTAssertFalse(same.routeMoved, "same address: no move")
        let roamed = address("127.0.0.1", 6001)
        let moved = try table.open(client.seal(textMessage(2, from: "alice", to: "bob")), from: roamed).get()
        XCTAssertTrue(moved.routeMoved)
        XCTAssertEqual(table.registration(ofSession: 42), Registration(user: "alice", route: Route(address: roamed, relayId: "r1"), session: "r1/1"))
        XCTAssertTrue(table.admitThrottleNotice(forSession: 42, now: t0))
        XCTAssertFalse(table.admitThrottleNotice(forSession: 42, now: t0 + .milliseconds(99)))
        XCTAssertTrue(table.admitThrottleNotice(forSession: 42, now: t0 + .milliseconds(100)))
        XCTAssertFalse(table.admitThrottleNotice(forSession: 7, now: t0), "no such session")
    }
}

final class RouteTableTests: XCTestCase {
    private let t0 = DevRelay.t0
    private let r2 = Route(address: address("127.0.0.2", 5000), relayId: "r2")

    private func payload(_ id: UInt64) -> RelayDelivery.Payload { .datagram(MessageCodec.encode(textMessage(id, from: "alice", to: "bob"))) }

    func testOneLookupPerUserWithABoundedBacklogThenTheCacheAnswers() {
        var table = RouteTable(cacheTTL: .seconds(2), unknownUserCacheTTL: .milliseconds(500), maxAwaitingLookup: 2)
        XCTAssertEqual(table.route(payload(1), to: "bob", sender: 7, now: t0), .lookUp)
        XCTAssertEqual(table.route(payload(2), to: "bob", now: t0), .waiting)
        XCTAssertEqual(table.route(payload(3), to: "bob", now: t0), .backlogFull)
        XCTAssertEqual(table.awaitingCount, 2)
        let (cached, waiting) = table.lookedUp("bob", route: r2, known: true, now: t0)
        XCTAssertEqual([cached.route], [r2])
        XCTAssertTrue(cached.known)
        XCTAssertEqual(cached.expires, t0 + .seconds(2))
        XCTAssertEqual(waiting, [RouteTable.Waiting(payload(1), sender: 7), RouteTable.Waiting(payload(2))], "each with the session that sent it")
        XCTAssertEqual(table.awaitingCount, 0)
        XCTAssertEqual(table.route(payload(4), to: "bob", now: t0 + .seconds(2) - .nanoseconds(1)), .cached(cached))
        XCTAssertEqual(table.route(payload(5), to: "bob", now: t0 + .seconds(2)), .lookUp, "expired")
        XCTAssertEqual(table.takeWaiting(for: "bob"), [RouteTable.Waiting(payload(5))])
    }

    func testAnUnknownAnswerSoonAfterTheUserWasKnownMeansTheStoreLostItsKeys() {
        var table = RouteTable(cacheTTL: .seconds(2), unknownUserCacheTTL: .milliseconds(500), maxAwaitingLookup: 2, knownMemory: .seconds(30))
        let gone = UserRoutes(receivers: [], relays: [], knownDevices: 0, known: false)
        XCTAssertFalse(table.contradictsRecentAnswers(gone, about: "bob", now: t0), "never known: really unknown")
        _ = table.lookedUp("bob", route: r2, known: true, now: t0)
        XCTAssertTrue(table.contradictsRecentAnswers(gone, about: "bob", now: t0 + .seconds(29)))
        XCTAssertFalse(table.contradictsRecentAnswers(gone, about: "bob", now: t0 + .seconds(30)), "forgotten after knownMemory")
        let offline = UserRoutes(receivers: [], relays: [], knownDevices: 1, known: true)
        XCTAssertFalse(table.contradictsRecentAnswers(offline, about: "bob", now: t0 + .seconds(1)), "known and offline is no contradiction")
        _ = table.lookedUp("ghost", route: nil, known: false, now: t0)
        XCTAssertFalse(table.contradictsRecentAnswers(gone, about: "ghost", now: t0 + .seconds(1)))
    }

    func testUnknownUsersAreTrustedBrieflyAndInvalidationsDropRoutes() {
        var table = RouteTable(cacheTTL: .seconds(2), unknownUserCacheTTL: .milliseconds(500), maxAwaitingLookup: 2)
        let (ghost, _) = table.lookedUp("ghost", route: nil, known: false, now: t0)
        XCTAssertEqual(ghost.expires, t0 + .milliseconds(500))
        XCTAssertEqual(table.route(payload(1), to: "ghost", now: t0 + .milliseconds(499)), .cached(ghost))
        XCTAssertEqual(table.route(payload(1), to: "ghost", now: t0 + .milliseconds(500)), .lookUp)
        for user in ["bob", "carol", "dave"] {
            _ = table.lookedUp(user, route: user == "dave" ? Route(address: r2.address, relayId: "r3") : r2, known: true, now: t0)
        }
        table.forget("bob")
        XCTAssertEqual(table.route(payload(2), to: "bob", now: t0), .lookUp)
        table.forgetRoutes(through: "r2")
        XCTAssertEqual(table.route(payload(3), to: "carol", now: t0), .lookUp)
        guard case .cached = table.route(payload(4), to: "dave", now: t0) else { return XCTFail("dave is on r3") }
        table.forgetAll()
        XCTAssertEqual(table.route(payload(5), to: "dave", now: t0), .lookUp)
    }
}

final class ConnectionTableTests: XCTestCase {
    private let t0 = DevRelay.t0

    func testConnectionsPerHostAreCappedAndFreedOnClose() {
        var table = ConnectionTable(connectionLimit: RateLimit(perSecond: 100, burst: 100), maxConnectionsPerHost: 1, heartbeat: .relay)
        XCTAssertNil(table.open(ConnectionID(1), host: "10.0.0.1", now: t0).refuse)
        XCTAssertNil(table.open(ConnectionID(2), host: "10.0.0.2", now: t0).refuse, "another host")
        XCTAssertEqual(table.open(ConnectionID(3), host: "10.0.0.1", now: t0).refuse, .seconds(1))
        XCTAssertEqual(table.close(ConnectionID(3)), .awaitingLogin)
        table.change(ConnectionID(1), .sessionStarted(user: "alice", session: 7, connected: SIMPMessage(kind: .connected)), now: t0)
        table.change(ConnectionID(1), .registered, now: t0)
        XCTAssertEqual(table.close(ConnectionID(1)), .connected(user: "alice", session: 7))
        XCTAssertNil(table.close(ConnectionID(1)))
        XCTAssertNil(table.open(ConnectionID(4), host: "10.0.0.1", now: t0).refuse, "freed")
        XCTAssertEqual(table.count, 2)
        XCTAssertEqual(table.host(of: ConnectionID(4)), "10.0.0.1")
    }

    func testHeartbeatsPingTheDueAndGiveUpTheSilent() {
        var table = ConnectionTable(
            connectionLimit: RateLimit(perSecond: 100, burst: 100), maxConnectionsPerHost: 10,
            heartbeat: HeartbeatPolicy(interval: .seconds(1), missLimit: 2))
        for id in [3, 1, 2] as [UInt64] { _ = table.open(ConnectionID(id), host: "h", now: t0) }
        XCTAssertEqual(table.pollHeartbeats(now: t0 + .milliseconds(999)).ping, [])
        let first = table.pollHeartbeats(now: t0 + .seconds(1))
        XCTAssertEqual(first.ping, [ConnectionID(1), ConnectionID(2), ConnectionID(3)])
        XCTAssertEqual(first.dead, [])
        table.heard(ConnectionID(2), now: t0 + .milliseconds(1500))
        let second = table.pollHeartbeats(now: t0 + .seconds(2))
        XCTAssertEqual(second.ping, [], "2 was heard half an interval ago")
        XCTAssertEqual(second.dead, [ConnectionID(1), ConnectionID(3)])
        XCTAssertEqual(table.nextHeartbeatDeadline, t0 + .milliseconds(2500))
        XCTAssertEqual(table.pollHeartbeats(now: t0 + .milliseconds(2500)).ping, [ConnectionID(2)])
        XCTAssertEqual(table.count, 3, "the dead are kept until they are closed")
    }
}
