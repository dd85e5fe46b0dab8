import NIOCore
import SIMPCore
import SIMPCoreTestKit
import XCTest

/// RelayCore with other relays on the same store: deliveries handed over, moves.
final class RelayCoreRelaysTests: XCTestCase {
    private let c1 = ConnectionID(1)
    private let elsewhere = address("127.0.0.7", 7777)

    /// A development-mode relay "r1" with bob connected on c1 (UDP 5555).
    private func relayWithBob() throws -> DevRelay {
        var relay = DevRelay()
        try relay.connect("bob", on: c1, port: 5555)
        return relay
    }

    /// An encoded message: what another relay hands over after checking it.
    private func payload(_ id: UInt64, from: String = "bob", to: String) -> ByteBuffer {
        MessageCodec.encode(textMessage(id, from: from, to: to))
    }

    /// `user`'s route on relay r2, as the store answers it.
    private func onR2(_ user: String, _ relay: inout DevRelay) -> [RelayAction] {
        relay.answer(.lookup(user: user, .single(Route(address: elsewhere, relayId: "r2"), known: true)))
    }

    func testDeliveryFromAnotherRelayGoesOutToTheNamedLocalUser() throws {
        var relay = try relayWithBob()
        let bytes = payload(1, from: "alice", to: "bob")
        XCTAssertEqual(
            relay.relayDelivery(RelayDelivery(user: "bob", payload: .datagram(bytes))), [relay.delivery(payload: bytes, to: "bob")],
            "sealed for bob by the relay that holds him, to bob's address")
    }

    func testReceiptFromAnotherRelayGoesDownTheUsersControlConnection() throws {
        var relay = try relayWithBob()
        let receipt = SIMPMessage(kind: .receipt, messageId: 9, fromUser: "alice", toUser: "bob")
        XCTAssertEqual(relay.relayDelivery(RelayDelivery(user: "bob", payload: .control(receipt))), [.send(c1, receipt)])
    }

    func testDeliveryForAUserWhoIsNotHereIsCountedAndBadBytesToo() throws {
        var relay = try relayWithBob()
        XCTAssertEqual(
            relay.relayDelivery(RelayDelivery(user: "carol", payload: .datagram(payload(1, to: "carol")))),
            [.reject(.recipientNotHere, detail: "delivery for carol, who has no session on r1")])
        for bad in [ByteBuffer(bytes: [0x44, 0, 0, 0]), ByteBuffer(bytes: [0x58, 0, 0, 1, 0x61])] {
            XCTAssertThrowsError(try RelayDelivery.decode(bad)) { error in
                XCTAssertEqual(
                    relay.run { $0.relayDeliveryReceived(bad, now: DevRelay.t0, into: &$1) },
                    [.reject(.badRelayDelivery, detail: "\(error)")])
            }
        }
    }

    func testReceiptForASenderOnAnotherRelayIsLookedUpThenPublished() throws {
        var relay = try relayWithBob()
        func published(_ id: UInt64) -> RelayAction {
            // The relay vouches for the receipt's sender.
            .store(
                .publish(
                    relay: "r2",
                    RelayDelivery(user: "alice", payload: .control(SIMPMessage(kind: .receipt, messageId: id, fromUser: "bob", toUser: "alice")))))
        }
        XCTAssertEqual(relay.control(SIMPMessage(kind: .receipt, messageId: 3, toUser: "alice"), on: c1), [.store(.lookup(user: "alice"))])
        XCTAssertEqual(onR2("alice", &relay), [published(3)])
        XCTAssertEqual(
            relay.control(SIMPMessage(kind: .receipt, messageId: 4, toUser: "alice"), on: c1), [published(4)],
            "cached now: the next receipt goes straight out")
    }

    func testMoveAnnouncementDropsTheCachedRoute() throws {
        var relay = try relayWithBob()
        XCTAssertEqual(relay.send(textMessage(1, from: "bob", to: "alice")), [.store(.lookup(user: "alice"))])
        XCTAssertEqual(
            onR2("alice", &relay), [.store(.publish(relay: "r2", RelayDelivery(user: "alice", payload: .datagram(payload(1, to: "alice")))))])
        XCTAssertEqual(
            relay.send(textMessage(2, from: "bob", to: "alice")),
            [.store(.publish(relay: "r2", RelayDelivery(user: "alice", payload: .datagram(payload(2, to: "alice")))))])
        XCTAssertEqual(relay.run { $0.userMoved(UserMove(user: "alice", relayId: "r3"), into: &$1) }, [])
        XCTAssertEqual(relay.send(textMessage(3, from: "bob", to: "alice")), [.store(.lookup(user: "alice"))])
    }

    func testUnheardPublishForgetsEveryRouteThroughThatRelay() throws {
        var relay = try relayWithBob()
        for user in ["alice", "dave"] {
            _ = relay.send(textMessage(1, from: "bob", to: user))
            _ = onR2(user, &relay)
        }
        let delivery = RelayDelivery(user: "alice", payload: .datagram(payload(1, to: "alice")))
        XCTAssertEqual(relay.answer(.publish(relay: "r2", delivery, listeners: 1)), [], "heard: nothing to do")
        XCTAssertEqual(
            relay.send(textMessage(2, from: "bob", to: "dave")),
            [.store(.publish(relay: "r2", RelayDelivery(user: "dave", payload: .datagram(payload(2, to: "dave")))))])
        XCTAssertEqual(
            relay.answer(.publish(relay: "r2", delivery, listeners: 0)),
            [.reject(.relayUnreachable, detail: "delivery for alice via r2: no relay listening")])
        XCTAssertEqual(relay.send(textMessage(3, from: "bob", to: "dave")), [.store(.lookup(user: "dave"))])
    }

    func testANewDeliverySubscriptionDropsEveryCachedRoute() throws {
        var relay = try relayWithBob()
        _ = relay.send(textMessage(1, from: "bob", to: "alice"))
        _ = onR2("alice", &relay)
        relay.core.deliveryChannelSubscribed()
        XCTAssertEqual(relay.send(textMessage(2, from: "bob", to: "alice")), [.store(.lookup(user: "alice"))], "moves may have been missed")
    }

    func testLocalUserWhoMovedElsewhereIsCheckedThenClosed() throws {
        var relay = try relayWithBob()
        XCTAssertEqual(relay.run { $0.userMoved(UserMove(user: "bob", relayId: "r1"), into: &$1) }, [], "own announcements are ignored")
        let check = StoreRequest.checkSession(user: "bob", session: "r1/1")
        XCTAssertEqual(
            relay.run { $0.userMoved(UserMove(user: "bob", relayId: "r2"), into: &$1) }, [.store(check), .store(.lookup(user: "bob"))],
            "the session is checked, and bob's devices and relays read again")
        XCTAssertEqual(relay.answer(.checkSession(user: "bob", session: "r1/1", current: "r1/1")), [], "the store still names this session")
        XCTAssertEqual(
            relay.answer(.checkSession(user: "bob", session: "r1/1", current: "other")),
            [
                .event(.userDisconnected(relay.registration(of: "bob"), .replacedElsewhere)),
                .send(c1, .error(.alreadyConnected, "bob connected again on another relay")), .close(c1),
            ])
        XCTAssertFalse(relay.core.isConnected("bob"))
        XCTAssertEqual(relay.closed(c1), [], "the store already names the new session")
        XCTAssertEqual(relay.answer(.checkSession(user: "bob", session: "r1/1", current: "other")), [])
    }

    func testASessionAnOperatorEndedIsToldSessionEndedNotAlreadyConnected() throws {
        var relay = try relayWithBob()
        let check = StoreRequest.checkSession(user: "bob", session: "r1/1")
        let moved = relay.run { $0.userMoved(UserMove(user: "bob", relayId: RelayCore.sessionEndedByOperator), into: &$1) }
        XCTAssertEqual(moved.first, .store(check), "the session is checked first")
        XCTAssertEqual(
            relay.answer(.checkSession(user: "bob", session: "r1/1", current: RelayCore.sessionEndedByOperator)),
            [
                .event(.userDisconnected(relay.registration(of: "bob"), .endedByOperator)),
                .send(c1, .error(.sessionEnded, "the relay's operator ended bob's session")), .close(c1),
            ])
    }

    func testRouteLeftBehindByThisRelayMeansOffline() throws {
        var relay = try relayWithBob()
        _ = relay.send(textMessage(1, from: "bob", to: "alice"))
        XCTAssertEqual(
            relay.answer(.lookup(user: "alice", .single(Route(address: elsewhere, relayId: "r1"), known: true))),
            [.store(.storeInInbox(user: "alice", message: textMessage(1, from: "bob", to: "alice")))], "offline, so stored")
    }

    func testEnvelopeRoundTripsAndMoveTextParses() throws {
        let receipt = SIMPMessage(kind: .receipt, messageId: 7, fromUser: "a", toUser: "b")
        for delivery in [
            RelayDelivery(user: "b", payload: .control(receipt), hops: 1),
            RelayDelivery(user: "ü b", payload: .datagram(payload(5, to: "ü b"))),
        ] {
            XCTAssertEqual(try RelayDelivery.decode(delivery.encoded()), delivery)
        }
        XCTAssertEqual(UserMove(encoded: UserMove(user: "a b", relayId: "r9").encoded), UserMove(user: "a b", relayId: "r9"))
        XCTAssertNil(UserMove(encoded: "nospace"))
    }
}
