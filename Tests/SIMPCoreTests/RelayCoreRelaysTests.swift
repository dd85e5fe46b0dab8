import NIOCore
import SIMPCore
import XCTest

/// RelayCore with other relays on the same Redis: deliveries through pub/sub, moves.
final class RelayCoreRelaysTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(10_000_000_000)
    private let c1 = ConnectionID(1), c2 = ConnectionID(2)
    private let bobAddress = try! SocketAddress(ipAddress: "127.0.0.1", port: 5555)
    private let elsewhere = try! SocketAddress(ipAddress: "127.0.0.7", port: 7777)

    /// A relay "r1" with bob connected on c1.
    private func coreWithBob() throws -> RelayCore {
        var core = RelayCore(configuration: .init(relayId: "r1", udpPort: 7000))
        core.connectionOpened(c1)
        var connect = SIMPMessage(kind: .connect, fromUser: "bob")
        connect.udpPort = 5555
        _ = core.controlReceived(connect, on: c1, peer: try SocketAddress(ipAddress: "127.0.0.1", port: 40_000), now: t0)
        _ = core.registrationCompleted(c1, succeeded: true)
        return core
    }

    private func datagram(_ id: UInt64, from: String = "bob", to: String) -> ByteBuffer {
        MessageCodec.encode(SIMPMessage(kind: .text, messageId: id, fromUser: from, toUser: to, content: "msg \(id)"))
    }

    func testDeliveryFromAnotherRelayGoesOutToTheNamedLocalUser() throws {
        var core = try coreWithBob()
        let bytes = datagram(1, from: "alice", to: "bob")
        let actions = core.relayDeliveryReceived(RelayDelivery(user: "bob", payload: .datagram(bytes)).encoded())
        guard actions.count == 1, case .deliver(let user, let delivered, let address) = actions[0] else { return XCTFail("\(actions)") }
        XCTAssertEqual(user, "bob")
        XCTAssertEqual(delivered, bytes)
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
        let missing = core.relayDeliveryReceived(RelayDelivery(user: "carol", payload: .datagram(datagram(1, to: "carol"))))
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
        _ = core.datagramReceived(datagram(1, to: "alice"), now: t0)
        _ = core.lookupCompleted(user: "alice", route: Route(address: elsewhere, relayId: "r2"), known: true, now: t0)
        XCTAssertEqual(core.datagramReceived(datagram(2, to: "alice"), now: t0).compactMap(published).map(\.relay), ["r2"])
        XCTAssertTrue(core.userMoved(UserMove(user: "alice", relayId: "r3")).isEmpty)
        XCTAssertEqual(core.datagramReceived(datagram(3, to: "alice"), now: t0).compactMap(lookedUp), ["alice"])
    }

    func testUnheardPublishForgetsEveryRouteThroughThatRelay() throws {
        var core = try coreWithBob()
        for user in ["alice", "dave"] {
            _ = core.datagramReceived(datagram(1, to: user), now: t0)
            _ = core.lookupCompleted(user: user, route: Route(address: elsewhere, relayId: "r2"), known: true, now: t0)
        }
        XCTAssertEqual(core.deliveryUnheard(relay: "r2", user: "alice").compactMap(rejected), [.relayUnreachable])
        XCTAssertEqual(core.datagramReceived(datagram(2, to: "dave"), now: t0).compactMap(lookedUp), ["dave"])
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
        _ = core.datagramReceived(datagram(1, to: "alice"), now: t0)
        let actions = core.lookupCompleted(user: "alice", route: Route(address: elsewhere, relayId: "r1"), known: true, now: t0)
        XCTAssertEqual(actions.compactMap(rejected), [.recipientOffline])
    }

    func testEnvelopeRoundTripsAndMoveTextParses() throws {
        let receipt = SIMPMessage(kind: .receipt, messageId: 7, fromUser: "a", toUser: "b")
        for delivery in [RelayDelivery(user: "b", payload: .control(receipt), hops: 1),
                         RelayDelivery(user: "ü b", payload: .datagram(datagram(5, to: "ü b")))] {
            XCTAssertEqual(try RelayDelivery.decode(delivery.encoded()), delivery)
        }
        XCTAssertEqual(UserMove(encoded: UserMove(user: "a b", relayId: "r9").encoded), UserMove(user: "a b", relayId: "r9"))
        XCTAssertNil(UserMove(encoded: "nospace"))
    }
}
