import NIOCore
import SIMPCore
import XCTest

/// RelayCore with other relays on the same Redis: deliveries through pub/sub, moves.
final class RelayCoreRelaysTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(10_000_000_000)
    private let c1 = ConnectionID(1), c2 = ConnectionID(2)
    private let bobAddress = try! SocketAddress(ipAddress: "127.0.0.1", port: 5555)
    private let elsewhere = try! SocketAddress(ipAddress: "127.0.0.7", port: 7777)

    /// bob's client: seals his datagrams, opens what the relay seals for him.
    private var bobSealer: DatagramSealer!
    private var bobOpener: DatagramOpener!

    /// A development-mode relay "r1" with bob connected on c1.
    private func coreWithBob() throws -> RelayCore {
        var configuration = RelayCore.Configuration(relayId: "r1", udpPort: 7000)
        configuration.requireLogin = false
        var core = RelayCore(configuration: configuration)
        core.connectionOpened(c1, now: t0)
        var connect = SIMPMessage(kind: .connect, fromUser: "bob")
        connect.udpPort = 5555
        _ = core.controlReceived(connect, on: c1, peer: try SocketAddress(ipAddress: "127.0.0.1", port: 40_000), now: t0)
        let connected = try XCTUnwrap(core.registrationCompleted(c1, succeeded: true).compactMap(sent).first?.message)
        let keys = SessionKeys(sessionId: connected.sessionId, secret: connected.sessionSecret)
        bobSealer = DatagramSealer(keys: keys, direction: .uplink)
        bobOpener = DatagramOpener(keys: keys, direction: .downlink)
        return core
    }

    /// An encoded message: what another relay hands over after checking it.
    private func payload(_ id: UInt64, from: String = "bob", to: String) -> ByteBuffer {
        MessageCodec.encode(SIMPMessage(kind: .text, messageId: id, fromUser: from, toUser: to, content: "msg \(id)"))
    }

    /// bob's datagram to `to`, sealed, arriving from bob's address.
    private func fromBob(_ core: inout RelayCore, _ id: UInt64, to: String) -> [RelayCore.Action] {
        core.datagramReceived(bobSealer.seal(payload: payload(id, to: to)), from: bobAddress, now: t0)
    }

    func testDeliveryFromAnotherRelayGoesOutToTheNamedLocalUser() throws {
        var core = try coreWithBob()
        let bytes = payload(1, from: "alice", to: "bob")
        let actions = core.relayDeliveryReceived(RelayDelivery(user: "bob", payload: .datagram(bytes)).encoded())
        guard actions.count == 1, case .deliver(let user, let delivered, let address) = actions[0] else { return XCTFail("\(actions)") }
        XCTAssertEqual(user, "bob")
        XCTAssertEqual(try bobOpener.open(delivered).payload, bytes, "sealed for bob by the relay that holds him")
        XCTAssertEqual(address, bobAddress)
    }

    func testReceiptFromAnotherRelayGoesDownTheUsersControlConnection() throws {
        var core = try coreWithBob()
        let receipt = SIMPMessage(kind: .receipt, messageId: 9, fromUser: "alice", toUser: "bob")
        let actions = core.relayDeliveryReceived(RelayDelivery(user: "bob", payload: .control(receipt)))
        XCTAssertEqual(actions.compactMap(sent).map(\.connection), [c1])
        XCTAssertEqual(actions.compactMap(sent).first?.message, receipt)
    }

    func testDeliveryForAUserWhoIsNotHereIsCountedAndBadBytesToo() throws {
        var core = try coreWithBob()
        let missing = core.relayDeliveryReceived(RelayDelivery(user: "carol", payload: .datagram(payload(1, to: "carol"))))
        XCTAssertEqual(missing.compactMap(rejected), [.recipientNotHere])
        XCTAssertEqual(core.relayDeliveryReceived(ByteBuffer(bytes: [0x44, 0, 0, 0])).compactMap(rejected), [.badRelayDelivery])
        XCTAssertEqual(core.relayDeliveryReceived(ByteBuffer(bytes: [0x58, 0, 0, 1, 0x61])).compactMap(rejected), [.badRelayDelivery])
    }

    func testReceiptForASenderOnAnotherRelayIsLookedUpThenPublished() throws {
        var core = try coreWithBob()
        let receipt = SIMPMessage(kind: .receipt, messageId: 3, toUser: "alice")
        XCTAssertEqual(core.controlReceived(receipt, on: c1, peer: bobAddress, now: t0).compactMap(lookedUp), ["alice"])
        let actions = core.lookupCompleted(user: "alice", route: Route(address: elsewhere, relayId: "r2"), known: true, now: t0)
        let publish = try XCTUnwrap(actions.compactMap(published).first)
        XCTAssertEqual(publish.relay, "r2")
        guard case .control(let routed) = publish.delivery.payload else { return XCTFail("\(publish.delivery)") }
        XCTAssertEqual(routed.fromUser, "bob", "the relay vouches for the receipt's sender")
        XCTAssertEqual(routed.messageId, 3)
        // Cached now: the next receipt goes straight out.
        let next = core.controlReceived(SIMPMessage(kind: .receipt, messageId: 4, toUser: "alice"), on: c1, peer: bobAddress, now: t0)
        XCTAssertEqual(next.compactMap(published).map(\.relay), ["r2"])
    }

    func testMoveAnnouncementDropsTheCachedRoute() throws {
        var core = try coreWithBob()
        _ = fromBob(&core, 1, to: "alice")
        _ = core.lookupCompleted(user: "alice", route: Route(address: elsewhere, relayId: "r2"), known: true, now: t0)
        XCTAssertEqual(fromBob(&core, 2, to: "alice").compactMap(published).map(\.relay), ["r2"])
        XCTAssertTrue(core.userMoved(UserMove(user: "alice", relayId: "r3")).isEmpty)
        XCTAssertEqual(fromBob(&core, 3, to: "alice").compactMap(lookedUp), ["alice"])
    }

    func testUnheardPublishForgetsEveryRouteThroughThatRelay() throws {
        var core = try coreWithBob()
        for user in ["alice", "dave"] {
            _ = fromBob(&core, 1, to: user)
            _ = core.lookupCompleted(user: user, route: Route(address: elsewhere, relayId: "r2"), known: true, now: t0)
        }
        XCTAssertEqual(core.deliveryUnheard(relay: "r2", user: "alice").compactMap(rejected), [.relayUnreachable])
        XCTAssertEqual(fromBob(&core, 2, to: "dave").compactMap(lookedUp), ["dave"])
    }

    func testLocalUserWhoMovedElsewhereIsCheckedThenClosed() throws {
        var core = try coreWithBob()
        XCTAssertTrue(core.userMoved(UserMove(user: "bob", relayId: "r1")).isEmpty, "own announcements are ignored")
        let check = core.userMoved(UserMove(user: "bob", relayId: "r2"))
        guard check.count == 1, case .checkSession(let user, let session) = check[0] else { return XCTFail("\(check)") }
        XCTAssertEqual(user, "bob")
        let actions = core.sessionSuperseded(user: user, session: session)
        XCTAssertEqual(actions.compactMap(sent).first?.message.errorCode, .alreadyConnected)
        XCTAssertEqual(actions.compactMap(closed), [c1])
        XCTAssertFalse(core.isConnected("bob"))
        XCTAssertTrue(core.connectionClosed(c1).isEmpty, "Redis already names the new session")
        XCTAssertTrue(core.sessionSuperseded(user: "bob", session: session).isEmpty)
    }

    func testRouteLeftBehindByThisRelayMeansOffline() throws {
        var core = try coreWithBob()
        _ = fromBob(&core, 1, to: "alice")
        let actions = core.lookupCompleted(user: "alice", route: Route(address: elsewhere, relayId: "r1"), known: true, now: t0)
        guard case .storeInInbox("alice", _)? = actions.first else { return XCTFail("offline, so stored: \(actions)") }
    }

    func testEnvelopeRoundTripsAndMoveTextParses() throws {
        let receipt = SIMPMessage(kind: .receipt, messageId: 7, fromUser: "a", toUser: "b")
        for delivery in [RelayDelivery(user: "b", payload: .control(receipt), hops: 1),
                         RelayDelivery(user: "ü b", payload: .datagram(payload(5, to: "ü b")))] {
            XCTAssertEqual(try RelayDelivery.decode(delivery.encoded()), delivery)
        }
        XCTAssertEqual(UserMove(encoded: UserMove(user: "a b", relayId: "r9").encoded), UserMove(user: "a b", relayId: "r9"))
        XCTAssertNil(UserMove(encoded: "nospace"))
    }
}
