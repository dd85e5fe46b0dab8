import NIOCore
import SIMPCore
import SIMPCoreTestKit
import XCTest

/// Datagrams carried in DATAGRAM control frames when UDP does not get through
/// (docs/PROTOCOL.md §5.5), on the relay core: the same datagram path as UDP, and each
/// session's datagrams going the way its newest datagram came.
final class RelayCoreFallbackTests: XCTestCase {
    private let c1 = ConnectionID(1), c2 = ConnectionID(2)

    /// alice (UDP 5555) and bob (UDP 6666), both said HELLO over UDP.
    private func relay() throws -> DevRelay {
        var relay = DevRelay()
        try relay.connect("alice", on: c1, port: 5555)
        try relay.connect("bob", on: c2, port: 6666)
        return relay
    }

    /// `user` says HELLO in a DATAGRAM frame, as a client that found UDP blocked does.
    private func moveToControl(_ user: String, _ relay: inout DevRelay) {
        let actions = relay.carry(SIMPMessage(kind: .hello, fromUser: user))
        XCTAssertEqual(actions, [pathWritten(user, overControl: true, relay), relay.carried(SIMPMessage(kind: .hello, toUser: user), to: user)])
    }

    /// The rewrite of `user`'s registration with its new datagram path (for `simp-server sessions`).
    private func pathWritten(_ user: String, overControl: Bool, _ relay: DevRelay) -> RelayAction {
        var registration = relay.registration(user, on: user == "alice" ? c1 : c2, port: user == "alice" ? 5555 : 6666)
        registration.overControl = overControl
        return .store(.moveRoute(registration))
    }

    /// The registration records the path when it changes, and only then: `simp-server sessions`
    /// shows it, and datagrams on an unchanged path write nothing (idle sessions cost Redis nothing).
    func testTheRegistrationIsRewrittenWhenTheSessionsPathChangesAndOnlyThen() throws {
        var relay = try relay()

        let toControl = relay.carry(SIMPMessage(kind: .hello, fromUser: "bob"))
        let again = relay.carry(SIMPMessage(kind: .ping, fromUser: "bob"))
        let probe = relay.send(SIMPMessage(kind: .hello, fromUser: "bob"))
        let back = relay.send(SIMPMessage(kind: .ping, fromUser: "bob"))
        let stillUDP = relay.send(SIMPMessage(kind: .ping, fromUser: "bob"))

        XCTAssertEqual(toControl.first, pathWritten("bob", overControl: true, relay))
        XCTAssertEqual(again, [], "already on the control path")
        XCTAssertFalse(probe.contains { if case .store = $0 { true } else { false } }, "a UDP HELLO moves nothing")
        XCTAssertEqual(back, [pathWritten("bob", overControl: false, relay)])
        XCTAssertEqual(stillUDP, [])
    }

    func testACarriedHelloIsAnsweredOnTheControlConnectionAndMovesTheSessionThere() throws {
        var relay = try relay()
        XCTAssertEqual(relay.core.sessionsOverControl, 0)

        let hello = relay.carry(SIMPMessage(kind: .hello, fromUser: "bob"))

        XCTAssertEqual(hello, [pathWritten("bob", overControl: true, relay), relay.carried(SIMPMessage(kind: .hello, toUser: "bob"), to: "bob")])
        XCTAssertEqual(relay.core.sessionsOverControl, 1)
        XCTAssertEqual(relay.core.sessionCount, 2)
    }

    func testDatagramsForASessionOnTheControlPathGoInFramesBothWays() throws {
        var relay = try relay()
        moveToControl("bob", &relay)
        let toBob = textMessage(1, from: "alice", to: "bob")
        var receipt = toBob.receipt(holdMicros: 0)
        receipt.attempt = 1

        let forward = relay.send(toBob) // alice over UDP
        let receiptCopy = relay.carry(receipt) // bob's receipt datagram, carried

        XCTAssertEqual(forward, [relay.carried(toBob, to: "bob")], "not to bob's UDP address")
        XCTAssertEqual(receiptCopy, [relay.delivery(receipt, to: "alice")], "alice is on UDP")
    }

    func testADatagramHandedOverByAnotherRelayGoesTheReceiversWay() throws {
        var relay = try relay()
        moveToControl("bob", &relay)
        let fromCarol = textMessage(9, from: "carol", to: "bob") // carol is on another relay

        let actions = relay.relayDelivery(RelayDelivery(user: "bob", payload: .datagram(MessageCodec.encode(fromCarol))))

        XCTAssertEqual(actions, [relay.carried(fromCarol, to: "bob")])
    }

    func testAUDPHelloIsAnsweredOverUDPWithoutMovingTheSessionAndAnotherDatagramMovesItBack() throws {
        var relay = try relay()
        moveToControl("bob", &relay)
        let bobUDP = relay.clients["bob"]!.address

        let probe = relay.send(SIMPMessage(kind: .hello, fromUser: "bob"))
        let stillCarried = relay.send(textMessage(1, from: "alice", to: "bob"))
        let ping = relay.send(SIMPMessage(kind: .ping, fromUser: "bob"))
        let overUDP = relay.send(textMessage(2, from: "alice", to: "bob"))

        XCTAssertEqual(probe, [relay.reply(SIMPMessage(kind: .hello, toUser: "bob"), to: "bob", at: bobUDP)], "the probe's answer goes over UDP")
        XCTAssertEqual(stillCarried, [relay.carried(textMessage(1, from: "alice", to: "bob"), to: "bob")], "a HELLO alone moves nothing")
        XCTAssertEqual(ping, [pathWritten("bob", overControl: false, relay)], "a keepalive: nothing to answer; back on UDP")
        XCTAssertEqual(overUDP, [relay.delivery(textMessage(2, from: "alice", to: "bob"), to: "bob")])
        XCTAssertEqual(relay.core.sessionsOverControl, 0)
    }

    func testAnOlderDatagramMovesNothing() throws {
        var relay = try relay()
        let late = relay.sealed(SIMPMessage(kind: .ping, fromUser: "bob")) // sealed over UDP, arrives late
        moveToControl("bob", &relay)

        XCTAssertEqual(relay.datagram(late, from: relay.clients["bob"]!.address), [], "accepted by the replay window")
        XCTAssertEqual(relay.core.sessionsOverControl, 1, "its counter is not the newest: bob stays on the control path")
    }

    func testADatagramCarriedOnAnotherSessionsConnectionIsRejected() throws {
        var relay = try relay()
        let bobs = relay.sealed(SIMPMessage(kind: .hello, fromUser: "bob"))

        let actions = relay.control(.carrying(bobs), on: c1)

        XCTAssertEqual(
            actions, [.reject(.unknownSession, detail: "session \(relay.clients["bob"]!.keys.sessionId) carried on c1, which is not its connection")])
        XCTAssertEqual(relay.core.sessionsOverControl, 0)
    }

    func testACarriedDatagramIsCheckedLikeAUDPOne() throws {
        var relay = try relay()
        var forged = relay.sealed(SIMPMessage(kind: .hello, fromUser: "bob"))
        forged.setInteger(UInt8(0xFF), at: forged.writerIndex - 1)
        let replayed = relay.sealed(SIMPMessage(kind: .ping, fromUser: "bob"))
        _ = relay.control(.carrying(replayed), on: c2)

        XCTAssertEqual(relay.control(.carrying(forged), on: c2), [.reject(.badMAC, detail: "session of bob carried on c2")])
        XCTAssertEqual(relay.control(.carrying(replayed), on: c2), [.reject(.replayed, detail: "session of bob carried on c2")])
        XCTAssertEqual(relay.control(.carrying(ByteBuffer(bytes: [1, 2, 3])), on: c2), [.reject(.unsealed, detail: "3 bytes carried on c2")])
    }

    func testACarriedDatagramAboveTheDatagramLimitIsRejected() throws {
        var relay = try relay()
        let tooLarge = SIMPMessage.carrying(ByteBuffer(repeating: 0xA2, count: relay.core.configuration.maxDatagramSize + 1))

        XCTAssertEqual(relay.control(tooLarge, on: c2), [.reject(.datagramTooLarge, detail: "carried datagram of 8193 bytes on c2")])
    }

    func testAClosedSessionOnTheControlPathIsNoLongerCounted() throws {
        var relay = try relay()
        moveToControl("bob", &relay)
        _ = relay.closed(c2)
        XCTAssertEqual(relay.core.sessionsOverControl, 0)
    }

    func testTheRelaysHandWrittenDatagramFrameIsTheCodecsFrame() throws {
        for size in [33, 127, 128, 8192, 20_000] {
            let sealed = ByteBuffer(bytes: (0..<size).map { UInt8(truncatingIfNeeded: $0) })
            var byHand = ByteBuffer(), byCodec = ByteBuffer()
            Framing.writeDatagramFrame(carrying: sealed, into: &byHand)
            Framing.writeFrame(.carrying(sealed), into: &byCodec)
            XCTAssertEqual(byHand, byCodec, "\(size) bytes")
            let decoded = try MessageCodec.decode(byHand.getSlice(at: 4, length: byHand.readableBytes - 4)!)
            XCTAssertEqual(decoded.kind, .datagram)
            XCTAssertEqual(decoded.datagram, Array(sealed.readableBytesView))
        }
    }
}
