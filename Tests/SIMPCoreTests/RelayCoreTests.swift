import NIOCore
import SIMPCore
import XCTest

// Pattern-matching helpers: each returns the payload of one kind of action, or nil.
private typealias Action = RelayCore.Action

private func sent(_ action: Action) -> (connection: ConnectionID, message: SIMPMessage)? {
    if case .send(let connection, let message) = action { return (connection, message) }
    return nil
}
private func forwarded(_ action: Action) -> (bytes: ByteBuffer, address: SocketAddress)? {
    if case .forward(let bytes, let address) = action { return (bytes, address) }
    return nil
}
private func registered(_ action: Action) -> (user: String, route: Route, session: String, connection: ConnectionID)? {
    if case .register(let user, let route, let session, let connection) = action { return (user, route, session, connection) }
    return nil
}
private func unregistered(_ action: Action) -> (user: String, session: String)? {
    if case .unregister(let user, let session) = action { return (user, session) }
    return nil
}
private func lookedUp(_ action: Action) -> String? {
    if case .lookup(let user) = action { return user }
    return nil
}
private func closed(_ action: Action) -> ConnectionID? {
    if case .close(let connection) = action { return connection }
    return nil
}
private func rejected(_ action: Action) -> RejectReason? {
    if case .reject(let reason, _) = action { return reason }
    return nil
}

final class RelayCoreTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(10_000_000_000)
    private let c1 = ConnectionID(1), c2 = ConnectionID(2)
    private let alicePeer = try! SocketAddress(ipAddress: "127.0.0.1", port: 40_001)
    private let bobPeer = try! SocketAddress(ipAddress: "::1", port: 40_002)

    private func makeCore() -> RelayCore {
        RelayCore(configuration: .init(relayId: "r1", udpPort: 7000))
    }

    private func connectMessage(_ user: String, udpPort: UInt32) -> SIMPMessage {
        var connect = SIMPMessage(kind: .connect, fromUser: user)
        connect.udpPort = udpPort
        return connect
    }

    /// Opens `connection`, sends CONNECT and completes the registration.
    private func connect(_ core: inout RelayCore, _ user: String, on connection: ConnectionID, peer: SocketAddress, udpPort: UInt32) {
        core.connectionOpened(connection)
        XCTAssertNotNil(core.controlReceived(connectMessage(user, udpPort: udpPort), on: connection, peer: peer).compactMap(registered).first)
        XCTAssertEqual(core.registrationCompleted(connection, succeeded: true).compactMap(sent).first?.message.kind, .connected)
    }

    private func datagram(_ id: UInt64, from: String = "alice", to: String) -> ByteBuffer {
        MessageCodec.encode(SIMPMessage(kind: .text, messageId: id, fromUser: from, toUser: to, content: "msg \(id)"))
    }

    private func address(_ ip: String, _ port: Int) -> SocketAddress { try! SocketAddress(ipAddress: ip, port: port) }

    // MARK: Control channel

    func testConnectRegistersPeerIPWithItsUDPPort() throws {
        var core = makeCore()
        core.connectionOpened(c1)
        let actions = core.controlReceived(connectMessage("alice", udpPort: 5555), on: c1, peer: alicePeer)
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
        XCTAssertEqual(actions.count, 3)
        guard case .loadInbox("alice") = actions[1], case .recordPresence("alice", online: true) = actions[2] else {
            return XCTFail("\(actions)")
        }
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
        let forward = try XCTUnwrap(core.datagramReceived(datagram(1, from: "bob", to: "alice"), now: t0).compactMap(forwarded).first)
        XCTAssertEqual(forward.address, address("127.0.0.1", 5556))
        XCTAssertEqual(core.connectionClosed(c2).compactMap(unregistered).first?.session, "r1/2")
    }

    // MARK: Datagrams

    func testDatagramToLocalUserIsForwardedUnchanged() throws {
        var core = makeCore()
        connect(&core, "bob", on: c2, peer: bobPeer, udpPort: 6666)
        let bytes = datagram(1, to: "bob")
        let actions = core.datagramReceived(bytes, now: t0)
        XCTAssertEqual(actions.count, 1)
        let forward = try XCTUnwrap(forwarded(actions[0]))
        XCTAssertEqual(forward.bytes, bytes)
        XCTAssertEqual(forward.address, address("::1", 6666))
    }

    func testUnknownRecipientIsLookedUpThenRejected() throws {
        var core = makeCore()
        connect(&core, "alice", on: c1, peer: alicePeer, udpPort: 5555)
        XCTAssertEqual(core.datagramReceived(datagram(5, to: "carol"), now: t0).compactMap(lookedUp), ["carol"])
        let actions = core.lookupCompleted(user: "carol", route: nil, now: t0)
        XCTAssertEqual(actions.compactMap(rejected), [.unknownRecipient])
        let error = try XCTUnwrap(actions.compactMap(sent).first)
        XCTAssertEqual(error.connection, c1)
        XCTAssertEqual(error.message.kind, .error)
        XCTAssertEqual(error.message.errorCode, .unknownRecipient)
        XCTAssertEqual(error.message.messageId, 5)
        XCTAssertEqual(error.message.toUser, "alice")
    }

    func testLookupForwardsQueuedDatagramsAndCachesRoute() throws {
        var core = makeCore()
        let queued = (1...3).map { datagram(UInt64($0), to: "dave") }
        XCTAssertEqual(core.datagramReceived(queued[0], now: t0).compactMap(lookedUp), ["dave"])
        XCTAssertTrue(core.datagramReceived(queued[1], now: t0).isEmpty)
        XCTAssertTrue(core.datagramReceived(queued[2], now: t0).isEmpty)

        let dave = address("127.0.0.9", 9000)
        let actions = core.lookupCompleted(user: "dave", route: Route(address: dave, relayId: "r2"), now: t0)
        XCTAssertEqual(actions.count, 3)
        XCTAssertEqual(actions.compactMap(forwarded).map(\.bytes), queued)
        XCTAssertEqual(actions.compactMap(forwarded).map(\.address), [dave, dave, dave])

        let ttl = core.configuration.routeCacheTTL
        let cached = core.datagramReceived(datagram(4, to: "dave"), now: t0 + ttl - .nanoseconds(1))
        XCTAssertEqual(cached.compactMap(forwarded).map(\.address), [dave])
        XCTAssertEqual(cached.count, 1)
        XCTAssertEqual(core.datagramReceived(datagram(5, to: "dave"), now: t0 + ttl).compactMap(lookedUp), ["dave"])
    }

    func testMalformedDatagramIsRejected() {
        var core = makeCore()
        let actions = core.datagramReceived(ByteBuffer(bytes: [0xFF, 0xFF, 0xFF]), now: t0)
        XCTAssertEqual(actions.count, 1)
        XCTAssertEqual(actions.compactMap(rejected), [.malformed])
    }
}
