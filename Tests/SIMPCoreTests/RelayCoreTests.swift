import NIOCore
import SIMPCore
import SIMPCoreTestKit
import XCTest

/// Routing and sessions of the relay core, on a development relay (CONNECT without login, so
/// the session secret comes in CONNECTED); login itself is in `RelayLoginTests`.
final class RelayCoreTests: XCTestCase {
    private let t0 = DevRelay.t0
    private let c1 = ConnectionID(1), c2 = ConnectionID(2)
    private let alicePeer = address("127.0.0.1", 40_001)
    private let bobPeer = address("::1", 40_002)

    /// A relay with alice (UDP 5555) and, if asked, bob (UDP 6666, over IPv6) connected.
    private func relay(withBob: Bool = false) throws -> DevRelay {
        var relay = DevRelay()
        try relay.connect("alice", on: c1, port: 5555, peer: alicePeer)
        if withBob { try relay.connect("bob", on: c2, port: 6666, peer: bobPeer) }
        return relay
    }

    // MARK: Control channel

    func testConnectRegistersPeerIPWithItsUDPPort() {
        var relay = DevRelay()
        XCTAssertEqual(relay.open(c1, peer: alicePeer), [])
        let actions = relay.control(DevRelay.connectMessage("alice", udpPort: 5555), on: c1, peer: alicePeer)
        let route = Route(address: address("127.0.0.1", 5555), relayId: "r1")
        XCTAssertEqual(actions, [.store(.register(Registration(user: "alice", route: route, session: "r1/1"), connection: c1))])
    }

    func testRegistrationSuccessSendsConnectedWithKeysFromTheInjectedEntropyThenLoadsTheInbox() throws {
        var relay = DevRelay(seed: 42)
        _ = relay.open(c1, peer: alicePeer)
        _ = relay.control(DevRelay.connectMessage("alice", udpPort: 5555), on: c1, peer: alicePeer)
        let actions = try relay.complete("alice", on: c1, port: 5555, peer: alicePeer)

        // The same draws as the core's: the decoy secret, the session secret, the session id.
        var entropy = Entropy.seeded(42)
        _ = entropy.bytes(32)
        var connected = SIMPMessage(kind: .connected, toUser: "alice")
        connected.udpPort = 7000
        connected.relayId = "r1"
        connected.sessionSecret = entropy.bytes(32)
        connected.sessionId = entropy.next()
        connected.maxDatagramSize = UInt32(SealedDatagram.defaultMaxDatagramSize)
        connected.batchReceipts = true
        connected.messageRateLimit = 500 // the default per-user rate, which clients pace under
        XCTAssertEqual(
            actions,
            [
                .send(c1, connected),
                .event(
                    .userConnected(Registration(user: "alice", route: Route(address: address("127.0.0.1", 5555), relayId: "r1"), session: "r1/1"))),
                .store(.announceMove(UserMove(user: "alice", relayId: "r1"))), .store(.recordPresence(user: "alice", online: true)),
            ])
        XCTAssertTrue(relay.core.isConnected("alice"))
    }

    func testRegistrationFailureSendsInternalError() {
        var relay = DevRelay()
        _ = relay.open(c1, peer: alicePeer)
        let connect = DevRelay.connectMessage("alice", udpPort: 5555)
        let registering = relay.control(connect, on: c1, peer: alicePeer)
        let register = StoreRequest.register(relay.registration("alice", on: c1, port: 5555, peer: alicePeer), connection: c1)
        XCTAssertEqual(registering, [.store(register)])

        XCTAssertEqual(relay.fail(register, StoreFailure("down")), [.send(c1, .error(.internal, "registry unavailable, try again"))])
        XCTAssertFalse(relay.core.isConnected("alice"))
        XCTAssertEqual(relay.control(connect, on: c1, peer: alicePeer), [.store(register)], "the connection may try CONNECT again")
    }

    func testControlMessageBeforeConnectIsNotConnected() {
        var relay = DevRelay()
        _ = relay.open(c1, peer: alicePeer)
        let receipt = SIMPMessage(kind: .receipt, messageId: 31, fromUser: "alice", toUser: "bob")
        XCTAssertEqual(
            relay.control(receipt, on: c1, peer: alicePeer),
            [
                .reject(.notConnected, detail: "\(SIMPMessage.Kind.receipt) on c1"),
                .send(c1, .error(.notConnected, "log in first (AUTH, then CONNECT)", messageId: 31)),
            ])
    }

    func testPingIsAnsweredWithPongOfSameId() throws {
        var relay = try relay()
        var pong = SIMPMessage(kind: .pong, messageId: 99)
        pong.time = 123
        XCTAssertEqual(relay.control(SIMPMessage(kind: .ping, messageId: 99, time: 123), on: c1, peer: alicePeer), [.send(c1, pong)])
    }

    func testReceiptGoesToOriginalSenderWithAuthenticatedFromUser() throws {
        var relay = try relay(withBob: true)
        var receipt = SIMPMessage(kind: .receipt, messageId: 9, fromUser: "mallory", toUser: "alice")
        receipt.attempt = 2
        receipt.holdMicros = 300
        var expected = receipt
        expected.fromUser = "bob"
        XCTAssertEqual(relay.control(receipt, on: c2, peer: bobPeer), [.send(c1, expected)])
    }

    func testConnectionClosedUnregistersSession() throws {
        var relay = try relay()
        XCTAssertEqual(
            relay.closed(c1),
            [
                .event(.userDisconnected(relay.registration(of: "alice"), .connectionClosed)), .store(.unregister(user: "alice", session: "r1/1")),
                .store(.recordPresence(user: "alice", online: false)),
            ])
        XCTAssertFalse(relay.core.isConnected("alice"))
        XCTAssertEqual(relay.closed(c1), [])
    }

    func testNewConnectReplacesOldSessionAndOldCloseKeepsNewOne() throws {
        var relay = try relay()
        _ = relay.open(c2, peer: alicePeer)
        let actions = relay.control(DevRelay.connectMessage("alice", udpPort: 5556), on: c2, peer: alicePeer)
        let register = StoreRequest.register(relay.registration("alice", on: c2, port: 5556, peer: alicePeer), connection: c2)
        XCTAssertEqual(register.registration?.session, "r1/2")
        XCTAssertEqual(
            actions,
            [
                .event(.userDisconnected(relay.registration(of: "alice"), .replaced)),
                .send(c1, .error(.alreadyConnected, "alice connected again elsewhere (a newer session of this device took over)")), .close(c1),
                .store(register),
            ])
        let completed = try relay.complete("alice", on: c2, port: 5556, peer: alicePeer)
        XCTAssertEqual(completed, relay.registeredActions("alice"))

        XCTAssertEqual(relay.closed(c1), [], "closing the old connection must not unregister the new session")
        XCTAssertTrue(relay.core.isConnected("alice"))
        try relay.connect("bob", on: ConnectionID(3), port: 6666, peer: bobPeer)
        let forward = relay.send(textMessage(1, from: "bob", to: "alice"))
        XCTAssertEqual(forward, [relay.delivery(textMessage(1, from: "bob", to: "alice"), to: "alice")])
        guard case .deliver(_, _, let to)? = forward.first else { return XCTFail("\(forward)") }
        XCTAssertEqual(to, address("127.0.0.1", 5556), "to the new session's address")
        XCTAssertEqual(
            relay.closed(c2),
            [
                .event(.userDisconnected(relay.registration(of: "alice"), .connectionClosed)), .store(.unregister(user: "alice", session: "r1/2")),
                .store(.recordPresence(user: "alice", online: false)),
            ])
    }

    func testAConnectionClosedWhileRegisteringUnregistersAndTheLateAnswerIsIgnored() {
        var relay = DevRelay()
        _ = relay.open(c1, peer: alicePeer)
        let register = StoreRequest.register(relay.registration("alice", on: c1, port: 5555, peer: alicePeer), connection: c1)
        XCTAssertEqual(relay.control(DevRelay.connectMessage("alice", udpPort: 5555), on: c1, peer: alicePeer), [.store(register)])
        XCTAssertEqual(
            relay.control(SIMPMessage(kind: .who, messageId: 2), on: c1, peer: alicePeer),
            [
                .reject(.notConnected, detail: "\(SIMPMessage.Kind.who) on c1"),
                .send(c1, .error(.notConnected, "log in first (AUTH, then CONNECT)", messageId: 2)),
            ], "not before CONNECTED")
        XCTAssertEqual(
            relay.closed(c1), [.store(.unregister(user: "alice", session: "r1/1")), .store(.recordPresence(user: "alice", online: false))])
        XCTAssertEqual(relay.answer(DevRelay.done(register)), [], "closed meanwhile")
        XCTAssertFalse(relay.core.isConnected("alice"))
    }

    // MARK: Datagrams

    func testDatagramToLocalUserIsResealedForTheRecipient() throws {
        var relay = try relay(withBob: true)
        let message = textMessage(1, from: "alice", to: "bob")
        let actions = relay.send(message)
        XCTAssertEqual(actions, [relay.delivery(message, to: "bob")])
        guard case .deliver(_, let bytes, let to)? = actions.first else { return XCTFail("\(actions)") }
        XCTAssertEqual(to, address("::1", 6666))
        XCTAssertEqual(try relay.open(bytes, as: "bob"), message, "bob's key opens it")
        XCTAssertThrowsError(try relay.open(bytes, as: "alice"), "not alice's")
    }

    func testUnknownRecipientIsLookedUpThenRejected() throws {
        var relay = try relay()
        XCTAssertEqual(relay.send(textMessage(5, from: "alice", to: "carol")), [.store(.lookup(user: "carol"))])
        var error = SIMPMessage.error(.unknownRecipient, "no user \"carol\" is registered", messageId: 5, to: "alice")
        error.fromUser = "carol"
        XCTAssertEqual(
            relay.answer(.lookup(user: "carol", .single(nil, known: false))),
            [.reject(.unknownRecipient, detail: "alice -> carol"), .send(c1, error)])
    }

    func testLookupPublishesQueuedPayloadsToTheUsersRelayAndCachesTheRoute() throws {
        var relay = try relay()
        func publish(_ id: UInt64) -> RelayAction {
            .store(
                .publish(
                    relay: "r2", RelayDelivery(user: "dave", payload: .datagram(MessageCodec.encode(textMessage(id, from: "alice", to: "dave"))))))
        }
        XCTAssertEqual(relay.send(textMessage(1, from: "alice", to: "dave")), [.store(.lookup(user: "dave"))])
        XCTAssertEqual(relay.send(textMessage(2, from: "alice", to: "dave")), [])
        XCTAssertEqual(relay.send(textMessage(3, from: "alice", to: "dave")), [])

        let route = Route(address: address("127.0.0.9", 9000), relayId: "r2")
        XCTAssertEqual(
            relay.answer(.lookup(user: "dave", .single(route, known: true))), [publish(1), publish(2), publish(3)],
            "dave's session key is on r2: r2 seals for him the checked payloads, unsealed")

        let ttl = relay.core.configuration.routeCacheTTL
        XCTAssertEqual(relay.send(textMessage(4, from: "alice", to: "dave"), now: t0 + ttl - .nanoseconds(1)), [publish(4)], "decided from the cache")
        XCTAssertEqual(
            relay.send(textMessage(5, from: "alice", to: "dave"), now: t0 + ttl), [.store(.lookup(user: "dave"))], "asked again after the TTL")
    }

    func testAUserTheStoreForgotMomentsAfterKnowingItIsRetriedNotRefused() throws {
        var relay = try relay()
        _ = relay.send(textMessage(1, from: "alice", to: "dave"))
        _ = relay.answer(.lookup(user: "dave", .single(Route(address: address("127.0.0.9", 9000), relayId: "r2"), known: true)))
        let later = t0 + relay.core.configuration.routeCacheTTL
        XCTAssertEqual(relay.send(textMessage(2, from: "alice", to: "dave"), now: later), [.store(.lookup(user: "dave"))])
        XCTAssertEqual(
            relay.answer(.lookup(user: "dave", .single(nil, known: false)), now: later),
            [.reject(.registryUnavailable, detail: "the store lost dave, known moments ago; not refused, retried")],
            "a failover lost dave's keys: alice retransmits instead of being told dave does not exist")
        let forgotten = t0 + relay.core.configuration.refreshInterval * 3
        XCTAssertEqual(relay.send(textMessage(3, from: "alice", to: "dave"), now: forgotten), [.store(.lookup(user: "dave"))])
        XCTAssertEqual(
            relay.answer(.lookup(user: "dave", .single(nil, known: false)), now: forgotten).first,
            .reject(.unknownRecipient, detail: "alice -> dave"), "still unknown after a registration TTL: refused")
    }

    func testARouteNamingThisRelayWithoutASessionIsOffline() throws {
        var relay = try relay()
        XCTAssertEqual(relay.send(textMessage(1, from: "alice", to: "erin")), [.store(.lookup(user: "erin"))])
        let stale = Route(address: address("10.0.0.1", 1), relayId: "r1")
        XCTAssertEqual(
            relay.answer(.lookup(user: "erin", .single(stale, known: false))),
            [.store(.storeInInbox(user: "erin", message: textMessage(1, from: "alice", to: "erin")))],
            "a stale registration of this relay: offline, stored")
    }

    func testKnownUserWithoutRouteIsOfflineAndStoredNotUnknown() throws {
        var relay = try relay()
        XCTAssertEqual(relay.send(textMessage(3, from: "alice", to: "bob")), [.store(.lookup(user: "bob"))])
        XCTAssertEqual(
            relay.answer(.lookup(user: "bob", .single(nil, known: true))),
            [.store(.storeInInbox(user: "bob", message: textMessage(3, from: "alice", to: "bob")))], "the payload goes to bob's inbox")
        XCTAssertEqual(
            relay.send(textMessage(4, from: "alice", to: "bob"), now: t0 + .milliseconds(10)),
            [.store(.storeInInbox(user: "bob", message: textMessage(4, from: "alice", to: "bob")))],
            "no ERROR to the sender: the message goes to the inbox")
    }

    func testAFailedLookupRejectsEveryWaitingPayload() throws {
        var relay = try relay()
        XCTAssertEqual(relay.send(textMessage(1, from: "alice", to: "dave")), [.store(.lookup(user: "dave"))])
        XCTAssertEqual(relay.send(textMessage(2, from: "alice", to: "dave")), [])
        let failed = RelayAction.reject(.registryUnavailable, detail: "registry lookup for dave failed")
        XCTAssertEqual(relay.fail(.lookup(user: "dave"), StoreFailure("down")), [failed, failed])
        XCTAssertEqual(relay.send(textMessage(3, from: "alice", to: "dave")), [.store(.lookup(user: "dave"))], "nothing cached")
    }

    func testPayloadsWaitingForALookupGoToTheRecipientWhoConnectedHereMeanwhile() throws {
        var relay = try relay()
        let message = textMessage(1, from: "alice", to: "bob")
        XCTAssertEqual(relay.send(message), [.store(.lookup(user: "bob"))])
        try relay.connect("bob", on: c2, port: 6666, peer: bobPeer)
        XCTAssertEqual(relay.answer(.lookup(user: "bob", .single(nil, known: true))), [relay.delivery(message, to: "bob")])
    }

    func testHelloIsAnsweredSealedForTheSessionToItsSourceAndAForgeryIsRejected() throws {
        var relay = try relay()
        XCTAssertEqual(
            relay.send(SIMPMessage(kind: .hello, fromUser: "alice")),
            [relay.reply(SIMPMessage(kind: .hello, toUser: "alice"), to: "alice", at: address("127.0.0.1", 5555))])
        var forger = DatagramSealer(
            keys: SessionKeys(sessionId: relay.clients["alice"]!.keys.sessionId, secret: [UInt8](repeating: 0, count: 32)), direction: .uplink)
        XCTAssertEqual(
            relay.datagram(forger.seal(SIMPMessage(kind: .hello, fromUser: "alice")), from: alicePeer),
            [.reject(.badMAC, detail: "session of alice from \(alicePeer)")])
    }

    func testUnsealedDatagramIsRejected() {
        var relay = DevRelay()
        XCTAssertEqual(
            relay.datagram(ByteBuffer(bytes: [0xFF, 0xFF, 0xFF]), from: alicePeer),
            [.reject(.unsealed, detail: "3 bytes from \(alicePeer)")])
    }

    func testTheNewestAuthenticDatagramFromANewAddressMovesTheRoute() throws {
        var relay = try relay(withBob: true)
        let roamed = address("127.0.0.1", 5999)
        let message = textMessage(1, from: "alice", to: "bob")
        let moved = relay.registration("alice", on: c1, port: 5999, peer: alicePeer)
        XCTAssertEqual(relay.send(message, from: roamed), [.store(.moveRoute(moved)), relay.delivery(message, to: "bob")])
        relay.move("alice", to: roamed)
        let back = textMessage(2, from: "bob", to: "alice")
        XCTAssertEqual(relay.send(back), [relay.delivery(back, to: "alice")], "to alice's new address")
    }
}
