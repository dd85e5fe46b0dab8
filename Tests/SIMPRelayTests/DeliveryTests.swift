import NIOCore
import SIMPClient
import SIMPCore
import SIMPRelay
import SIMPTestSupport
import XCTest

/// End to end against a real redis-server and real loopback sockets.
final class DeliveryTests: RelayTestCase {
    func testMessageIsDeliveredOnceAndReceipted() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let bobClient = try await relay.connectClient(user: bob)
        let inbox = MessageInbox(bobClient)
        let aliceClient = try await relay.connectClient(user: alice)

        let result = try await aliceClient.send(text: "hello, bob", to: bob)

        guard case .delivered(let id, let latency, let attempts) = result else { return XCTFail("\(result)") }
        XCTAssertEqual(attempts, 1)
        XCTAssertGreaterThan(latency, .zero)
        let arrived = await inbox.waitFor(1)
        XCTAssertTrue(arrived)
        let messages = await inbox.messages
        XCTAssertEqual(messages.map(\.messageId), [id])
        XCTAssertEqual(messages.first?.content, "hello, bob")
        XCTAssertEqual(messages.first?.fromUser, alice)
        XCTAssertEqual(messages.first?.toUser, bob)
        // The send completes on whichever receipt copy comes first: the relay may not have read
        // the control-channel copy yet.
        _ = try await Eventually.holds { try await relay.server.statistics().receiptsRouted >= 1 }
        let stats = try await relay.server.statistics()
        XCTAssertEqual(stats.datagramsForwarded, 2, "the message, and the receipt's datagram copy")
        XCTAssertEqual(stats.receiptsRouted, 1, "the receipt's control-channel copy")
    }

    func testRegistrationLivesInRedisWhileConnectedAndIsRemovedOnLeave() async throws {
        let bob = TestRelay.uniqueUser("bob")
        let client = try await relay.connectClient(user: bob)
        let key = "simp:user:{\(bob)}"

        let fields = try await relay.inspector.command(["HMGET", key, "addr", "relay"]).array ?? []
        XCTAssertEqual(fields.first?.string, client.localDatagramAddress.flatMap(AddressText.format))
        XCTAssertEqual(fields.last?.string, relay.server.configuration.relayId)
        let ttl = try await relay.inspector.command(["TTL", key]).integer ?? -2
        XCTAssertGreaterThan(ttl, 0, "the registration must expire unless refreshed")

        await client.close()
        let removed = try await Eventually.holds {
            try await self.relay.inspector.command(["EXISTS", key]).integer == 0
        }
        XCTAssertTrue(removed, "\(key) still exists after \(bob) left")
    }

    func testDroppedDatagramIsRetransmittedAndDeliveredExactlyOnce() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let bobClient = try await relay.connectClient(user: bob)
        let inbox = MessageInbox(bobClient)
        let proxy = try await DatagramProxy.start(target: relay.server.datagramAddress!) { _, index in
            index == 1 ? 0 : 1 // lose the first datagram only
        }
        defer { Task { await proxy.stop() } }
        let aliceClient = try await relay.connectClient(user: alice) { $0.datagramTarget = proxy.address }

        let result = try await aliceClient.send(text: "second time lucky", to: bob)

        guard case .delivered(let id, _, let attempts) = result else { return XCTFail("\(result)") }
        XCTAssertEqual(attempts, 2)
        let counts = try await proxy.counts()
        XCTAssertEqual(counts.dropped, 1)
        _ = await inbox.waitFor(1)
        _ = await Eventually.stays { await inbox.messages.count == 1 } // quiet period: room for a stray duplicate
        let messages = await inbox.messages
        XCTAssertEqual(messages.map(\.messageId), [id])
        let stats = try await aliceClient.statistics()
        XCTAssertEqual(stats.retransmits, 1)
    }

    func testConversationOrderSurvivesALostFirstDatagram() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let bobClient = try await relay.connectClient(user: bob)
        let inbox = MessageInbox(bobClient)
        let proxy = try await DatagramProxy.start(target: relay.server.datagramAddress!) { _, index in
            index == 1 ? 0 : 1 // "1" is lost once, so "2" and "3" arrive before it
        }
        defer { Task { await proxy.stop() } }
        let aliceClient = try await relay.connectClient(user: alice) { $0.datagramTarget = proxy.address }

        var outcomes: [EventLoopFuture<SendResult>] = []
        for text in ["1", "2", "3"] {
            outcomes.append(try await aliceClient.submit(SIMPMessage(kind: .text, toUser: bob, content: text)).result)
        }
        for outcome in outcomes {
            guard case .delivered = try await outcome.get() else { return XCTFail("not delivered") }
        }

        let arrived = await inbox.waitFor(3)
        XCTAssertTrue(arrived)
        let contents = await inbox.messages.map(\.content)
        XCTAssertEqual(contents, ["1", "2", "3"])
    }

    func testDuplicatedDatagramsAreStoppedAtTheRelayAndDeliveredOnce() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let bobClient = try await relay.connectClient(user: bob)
        let inbox = MessageInbox(bobClient)
        let proxy = try await DatagramProxy.start(target: relay.server.datagramAddress!) { _, _ in 3 }
        defer { Task { await proxy.stop() } }
        let aliceClient = try await relay.connectClient(user: alice) { $0.datagramTarget = proxy.address }

        for n in 1...5 {
            let result = try await aliceClient.send(text: "copy \(n)", to: bob)
            guard case .delivered = result else { return XCTFail("\(result)") }
        }

        let arrived = await inbox.waitFor(5)
        XCTAssertTrue(arrived)
        _ = await Eventually.stays { await inbox.messages.count == 5 } // quiet period: a network copy would show
        let contents = await inbox.messages.map(\.content)
        XCTAssertEqual(contents, (1...5).map { "copy \($0)" })
        // Network copies carry the same counter: the relay's replay window stops them.
        let relayStats = try await relay.server.statistics()
        XCTAssertEqual(relayStats.rejected[.replayed], 10)
        XCTAssertEqual(relayStats.datagramsForwarded, 10, "five messages, five receipt datagrams")
    }

    func testUnknownRecipientIsReportedToTheSender() async throws {
        let alice = try await relay.connectClient(user: TestRelay.uniqueUser("alice"))
        let nobody = TestRelay.uniqueUser("nobody")

        let result = try await alice.send(text: "anyone?", to: nobody)

        guard case .failed(_, .rejected(let code, let reason)) = result else { return XCTFail("\(result)") }
        XCTAssertEqual(code, .unknownRecipient)
        XCTAssertTrue(reason.contains(nobody), reason)
        let stats = try await relay.server.statistics()
        XCTAssertEqual(stats.rejected[.unknownRecipient], 1)
    }

    func testUnreceiptedMessageIsGivenUpAndReported() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        _ = try await relay.connectClient(user: bob)
        let blackhole = try await DatagramProxy.start(target: relay.server.datagramAddress!) { _, _ in 0 }
        defer { Task { await blackhole.stop() } }
        let aliceClient = try await relay.connectClient(user: alice) {
            $0.datagramTarget = blackhole.address
            $0.retransmit.maxAttempts = 3
            $0.retransmit.initialRTO = .milliseconds(50)
        }

        let result = try await aliceClient.send(text: "into the void", to: bob)

        XCTAssertEqual(result.failure, .timedOut(attempts: 3))
        let counts = try await blackhole.counts()
        XCTAssertEqual(counts.dropped, 5, "the first transmission, then two retransmissions of two copies each")
    }
}
