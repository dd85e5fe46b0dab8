import NIOCore
import SIMPCore
import XCTest

// Pattern-matching helpers: each returns the payload of one kind of action, or nil.
typealias Action = RelayCore.Action

func sent(_ action: Action) -> (connection: ConnectionID, message: SIMPMessage)? {
    if case .send(let connection, let message) = action { return (connection, message) }
    return nil
}
func forwarded(_ action: Action) -> (bytes: ByteBuffer, address: SocketAddress)? {
    if case .deliver(_, let bytes, let address) = action { return (bytes, address) }
    return nil
}
func registered(_ action: Action) -> (user: String, route: Route, session: String, connection: ConnectionID)? {
    if case .register(let user, let route, let session, let connection) = action { return (user, route, session, connection) }
    return nil
}
func unregistered(_ action: Action) -> (user: String, session: String)? {
    if case .unregister(let user, let session) = action { return (user, session) }
    return nil
}
func lookedUp(_ action: Action) -> String? {
    if case .lookup(let user) = action { return user }
    return nil
}
func closed(_ action: Action) -> ConnectionID? {
    if case .close(let connection) = action { return connection }
    return nil
}
func published(_ action: Action) -> (relay: String, delivery: RelayDelivery)? {
    if case .publish(let relay, let delivery) = action { return (relay, delivery) }
    return nil
}
func rejected(_ action: Action) -> RejectReason? {
    if case .reject(let reason, _) = action { return reason }
    return nil
}

/// Routing and sessions of the relay core, on a development relay (CONNECT without login, so
/// the session secret comes in CONNECTED); login itself is in `RelayLoginTests`.
final class RelayCoreTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(10_000_000_000)
    private let c1 = ConnectionID(1), c2 = ConnectionID(2)
    private let alicePeer = try! SocketAddress(ipAddress: "127.0.0.1", port: 40_001)
    private let bobPeer = try! SocketAddress(ipAddress: "::1", port: 40_002)
    /// Each connected user's datagram address and session keys, as its client would hold them.
    private var clients: [String: (address: SocketAddress, sealer: DatagramSealer, opener: DatagramOpener)] = [:]

    private func makeCore() -> RelayCore {
        var configuration = RelayCore.Configuration(relayId: "r1", udpPort: 7000)
        configuration.requireLogin = false
        return RelayCore(configuration: configuration)
    }

    private func connectMessage(_ user: String, udpPort: UInt32) -> SIMPMessage {
        var connect = SIMPMessage(kind: .connect, fromUser: user)
        connect.udpPort = udpPort
        return connect
    }

    /// Opens `connection`, sends CONNECT and completes the registration; keeps the session keys.
    private func connect(_ core: inout RelayCore, _ user: String, on connection: ConnectionID, peer: SocketAddress, udpPort: UInt32) {
        core.connectionOpened(connection, now: t0)
        XCTAssertNotNil(core.controlReceived(connectMessage(user, udpPort: udpPort), on: connection, peer: peer, now: t0).compactMap(registered).first)
        let connected = core.registrationCompleted(connection, succeeded: true).compactMap(sent).first?.message
        XCTAssertEqual(connected?.kind, .connected)
        let keys = SessionKeys(sessionId: connected!.sessionId, secret: connected!.sessionSecret)
        var address = peer
        address.port = Int(udpPort)
        clients[user] = (address, DatagramSealer(keys: keys, direction: .uplink), DatagramOpener(keys: keys, direction: .downlink))
    }

    private func message(_ id: UInt64, from: String, to: String) -> SIMPMessage {
        SIMPMessage(kind: .text, messageId: id, fromUser: from, toUser: to, content: "msg \(id)")
    }

    /// A datagram from `from`, sealed with its session's keys.
    private func datagram(_ id: UInt64, from: String = "alice", to: String) -> ByteBuffer {
        clients[from]!.sealer.seal(message(id, from: from, to: to))
    }

    /// `from`'s datagram arriving from its registered address.
    private func receive(_ core: inout RelayCore, _ id: UInt64, from: String = "alice", to: String, now: NIODeadline? = nil) -> [Action] {
        core.datagramReceived(datagram(id, from: from, to: to), from: clients[from]!.address, now: now ?? t0)
    }

    /// What `user`'s client makes of a forwarded datagram.
    private func open(_ bytes: ByteBuffer, as user: String) throws -> SIMPMessage {
        try MessageCodec.decode(try clients[user]!.opener.open(bytes).payload)
    }

    private func address(_ ip: String, _ port: Int) -> SocketAddress { try! SocketAddress(ipAddress: ip, port: port) }

    // MARK: Control channel

    func testConnectRegistersPeerIPWithItsUDPPort() throws {
        var core = makeCore()
        core.connectionOpened(c1, now: t0)
        let actions = core.controlReceived(connectMessage("alice", udpPort: 5555), on: c1, peer: alicePeer, now: t0)
        XCTAssertEqual(actions.count, 1)
        let register = try XCTUnwrap(registered(actions[0]))
        XCTAssertEqual(register.user, "alice")
        XCTAssertEqual(register.route, Route(address: address("127.0.0.1", 5555), relayId: "r1"))
        XCTAssertEqual(register.session, "r1/1")
        XCTAssertEqual(register.connection, c1)
    }

    func testRegistrationSuccessSendsConnectedThenLoadsTheInbox() throws {
        var core = makeCore()
        core.connectionOpened(c1)
        _ = core.controlReceived(connectMessage("alice", udpPort: 5555), on: c1, peer: alicePeer)
        let actions = core.registrationCompleted(c1, succeeded: true)
        XCTAssertEqual(actions.count, 4)
        guard case .announceMove(let move) = actions[1], case .loadInbox("alice") = actions[2],
              case .recordPresence("alice", online: true) = actions[3] else { return XCTFail("\(actions)") }
        XCTAssertEqual(move, UserMove(user: "alice", relayId: "r1"))
        let (connection, message) = try XCTUnwrap(sent(actions[0]))
        XCTAssertEqual(connection, c1)
        XCTAssertEqual(message.kind, .connected)
        XCTAssertEqual(message.udpPort, 7000)
        XCTAssertEqual(message.relayId, "r1")
        XCTAssertEqual(message.toUser, "alice")
        XCTAssertTrue(core.isConnected("alice"))
    }

    func testRegistrationFailureSendsInternalError() throws {
        var core = makeCore()
        core.connectionOpened(c1)
        _ = core.controlReceived(connectMessage("alice", udpPort: 5555), on: c1, peer: alicePeer)
        let actions = core.registrationCompleted(c1, succeeded: false)
        XCTAssertEqual(actions.count, 1)
        let (connection, message) = try XCTUnwrap(sent(actions[0]))
        XCTAssertEqual(connection, c1)
        XCTAssertEqual(message.kind, .error)
        XCTAssertEqual(message.errorCode, .internal)
        XCTAssertFalse(core.isConnected("alice"))
        // The connection may try CONNECT again.
        XCTAssertNotNil(core.controlReceived(connectMessage("alice", udpPort: 5555), on: c1, peer: alicePeer).compactMap(registered).first)
    }

    func testControlMessageBeforeConnectIsNotConnected() throws {
        var core = makeCore()
        core.connectionOpened(c1)
        let receipt = SIMPMessage(kind: .receipt, messageId: 31, fromUser: "alice", toUser: "bob")
        let actions = core.controlReceived(receipt, on: c1, peer: alicePeer)
        XCTAssertEqual(actions.compactMap(rejected), [.notConnected])
        let error = try XCTUnwrap(actions.compactMap(sent).first)
        XCTAssertEqual(error.connection, c1)
        XCTAssertEqual(error.message.errorCode, .notConnected)
        XCTAssertEqual(error.message.messageId, 31)
    }

    func testPingIsAnsweredWithPongOfSameId() throws {
        var core = makeCore()
        connect(&core, "alice", on: c1, peer: alicePeer, udpPort: 5555)
        let ping = SIMPMessage(kind: .ping, messageId: 99, time: 123)
        let actions = core.controlReceived(ping, on: c1, peer: alicePeer)
        XCTAssertEqual(actions.count, 1)
        let (connection, pong) = try XCTUnwrap(sent(actions[0]))
        XCTAssertEqual(connection, c1)
        XCTAssertEqual(pong.kind, .pong)
        XCTAssertEqual(pong.messageId, 99)
        XCTAssertEqual(pong.time, 123)
    }

    func testReceiptGoesToOriginalSenderWithAuthenticatedFromUser() throws {
        var core = makeCore()
        connect(&core, "alice", on: c1, peer: alicePeer, udpPort: 5555)
        connect(&core, "bob", on: c2, peer: bobPeer, udpPort: 6666)
        var receipt = SIMPMessage(kind: .receipt, messageId: 9, fromUser: "mallory", toUser: "alice")
        receipt.attempt = 2
        receipt.holdMicros = 300
        let actions = core.controlReceived(receipt, on: c2, peer: bobPeer)
        XCTAssertEqual(actions.count, 1)
        let (connection, routed) = try XCTUnwrap(sent(actions[0]))
        XCTAssertEqual(connection, c1)
        var expected = receipt
        expected.fromUser = "bob"
        XCTAssertEqual(routed, expected)
    }

    func testConnectionClosedUnregistersSession() throws {
        var core = makeCore()
        connect(&core, "alice", on: c1, peer: alicePeer, udpPort: 5555)
        let actions = core.connectionClosed(c1)
        XCTAssertEqual(actions.count, 2)
        guard case .recordPresence("alice", online: false) = actions[1] else { return XCTFail("\(actions)") }
        let unregister = try XCTUnwrap(unregistered(actions[0]))
        XCTAssertEqual(unregister.user, "alice")
        XCTAssertEqual(unregister.session, "r1/1")
        XCTAssertFalse(core.isConnected("alice"))
        XCTAssertTrue(core.connectionClosed(c1).isEmpty)
    }

    func testNewConnectReplacesOldSessionAndOldCloseKeepsNewOne() throws {
        var core = makeCore()
        connect(&core, "alice", on: c1, peer: alicePeer, udpPort: 5555)
        core.connectionOpened(c2)
        let actions = core.controlReceived(connectMessage("alice", udpPort: 5556), on: c2, peer: alicePeer)
        let error = try XCTUnwrap(actions.compactMap(sent).first)
        XCTAssertEqual(error.connection, c1)
        XCTAssertEqual(error.message.errorCode, .alreadyConnected)
        XCTAssertEqual(actions.compactMap(closed), [c1])
        let register = try XCTUnwrap(actions.compactMap(registered).first)
        XCTAssertEqual(register.session, "r1/2")
        XCTAssertEqual(register.connection, c2)
        XCTAssertEqual(core.registrationCompleted(c2, succeeded: true).compactMap(sent).first?.message.kind, .connected)

        XCTAssertTrue(core.connectionClosed(c1).isEmpty, "closing the old connection must not unregister the new session")
        XCTAssertTrue(core.isConnected("alice"))
        connect(&core, "bob", on: ConnectionID(3), peer: bobPeer, udpPort: 6666)
        let forward = try XCTUnwrap(receive(&core, 1, from: "bob", to: "alice").compactMap(forwarded).first)
        XCTAssertEqual(forward.address, address("127.0.0.1", 5556))
        XCTAssertEqual(core.connectionClosed(c2).compactMap(unregistered).first?.session, "r1/2")
    }

    // MARK: Datagrams

    func testDatagramToLocalUserIsResealedForTheRecipient() throws {
        var core = makeCore()
        connect(&core, "alice", on: c1, peer: alicePeer, udpPort: 5555)
        connect(&core, "bob", on: c2, peer: bobPeer, udpPort: 6666)
        let actions = receive(&core, 1, to: "bob")
        XCTAssertEqual(actions.count, 1)
        let forward = try XCTUnwrap(forwarded(actions[0]))
        XCTAssertEqual(forward.address, address("::1", 6666))
        XCTAssertEqual(try open(forward.bytes, as: "bob"), message(1, from: "alice", to: "bob"), "bob's key opens it")
        XCTAssertThrowsError(try open(forward.bytes, as: "alice"), "not alice's")
    }

    func testUnknownRecipientIsLookedUpThenRejected() throws {
        var core = makeCore()
        connect(&core, "alice", on: c1, peer: alicePeer, udpPort: 5555)
        XCTAssertEqual(receive(&core, 5, to: "carol").compactMap(lookedUp), ["carol"])
        let actions = core.lookupCompleted(user: "carol", route: nil, now: t0)
        XCTAssertEqual(actions.compactMap(rejected), [.unknownRecipient])
        let error = try XCTUnwrap(actions.compactMap(sent).first)
        XCTAssertEqual(error.connection, c1)
        XCTAssertEqual(error.message.kind, .error)
        XCTAssertEqual(error.message.errorCode, .unknownRecipient)
        XCTAssertEqual(error.message.messageId, 5)
        XCTAssertEqual(error.message.toUser, "alice")
    }

    func testLookupPublishesQueuedPayloadsToTheUsersRelayAndCachesTheRoute() throws {
        var core = makeCore()
        connect(&core, "alice", on: c1, peer: alicePeer, udpPort: 5555)
        XCTAssertEqual(receive(&core, 1, to: "dave").compactMap(lookedUp), ["dave"])
        XCTAssertTrue(receive(&core, 2, to: "dave").isEmpty)
        XCTAssertTrue(receive(&core, 3, to: "dave").isEmpty)

        let dave = address("127.0.0.9", 9000)
        let actions = core.lookupCompleted(user: "dave", route: Route(address: dave, relayId: "r2"), now: t0)
        XCTAssertEqual(actions.compactMap(published).map(\.relay), ["r2", "r2", "r2"], "dave's session key is on r2: r2 seals for him")
        let payloads = try actions.compactMap(published).map { delivery -> SIMPMessage in
            guard case .datagram(let payload) = delivery.delivery.payload else { throw XCTSkip("not a datagram") }
            return try MessageCodec.decode(payload)
        }
        XCTAssertEqual(payloads, (1...3).map { message(UInt64($0), from: "alice", to: "dave") }, "the checked payloads, unsealed")

        let ttl = core.configuration.routeCacheTTL
        let cached = receive(&core, 4, to: "dave", now: t0 + ttl - .nanoseconds(1))
        XCTAssertEqual(cached.compactMap(published).map(\.relay), ["r2"], "decided from the cache")
        XCTAssertEqual(receive(&core, 5, to: "dave", now: t0 + ttl).compactMap(lookedUp), ["dave"], "asked again after the TTL")
    }

    func testARouteNamingThisRelayWithoutASessionIsOffline() throws {
        var core = makeCore()
        connect(&core, "alice", on: c1, peer: alicePeer, udpPort: 5555)
        XCTAssertEqual(receive(&core, 1, to: "erin").compactMap(lookedUp), ["erin"])
        let actions = core.lookupCompleted(user: "erin", route: Route(address: address("10.0.0.1", 1), relayId: "r1"), now: t0)
        guard case .storeInInbox("erin", _)? = actions.first else { return XCTFail("a stale registration of this relay: offline, stored: \(actions)") }
    }

    func testKnownUserWithoutRouteIsOfflineAndStoredNotUnknown() throws {
        var core = makeCore()
        connect(&core, "alice", on: c1, peer: alicePeer, udpPort: 5555)
        XCTAssertEqual(receive(&core, 3, to: "bob").compactMap(lookedUp), ["bob"])

        let offline = core.lookupCompleted(user: "bob", route: nil, known: true, now: t0)

        XCTAssertEqual(offline.count, 1)
        guard case .storeInInbox("bob", let stored) = offline[0] else { return XCTFail("\(offline)") }
        XCTAssertEqual(stored, message(3, from: "alice", to: "bob"), "the payload goes to bob's inbox")
        let cached = receive(&core, 4, to: "bob", now: t0 + .milliseconds(10))
        guard case .storeInInbox("bob", _) = cached.first else { return XCTFail("\(cached)") }
        XCTAssertEqual(cached.count, 1, "no ERROR to the sender: the message goes to the inbox")
    }

    func testUnsealedDatagramIsRejected() {
        var core = makeCore()
        let actions = core.datagramReceived(ByteBuffer(bytes: [0xFF, 0xFF, 0xFF]), from: alicePeer, now: t0)
        XCTAssertEqual(actions.count, 1)
        XCTAssertEqual(actions.compactMap(rejected), [.unsealed])
    }
}
