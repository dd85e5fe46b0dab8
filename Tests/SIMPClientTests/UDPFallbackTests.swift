import NIOCore
import SIMPClient
import SIMPCore
import SIMPRelay
import SIMPTestSupport
import XCTest

/// Clients whose UDP is blocked (in-process: `ClientConfiguration.udpBlock` drops every datagram
/// their UDP socket would send or receive) carry their datagrams in DATAGRAM frames on the
/// control connection (docs/PROTOCOL.md §5.5), with a real relay, a real Redis and loopback
/// sockets; each message arrives once and in order, and the client comes back to UDP.
final class UDPFallbackTests: XCTestCase {
    private var relay: TestRelay?
    private var cluster: TestRelayCluster?

    override func tearDown() async throws {
        await relay?.stop()
        await cluster?.stop()
    }

    private func startRelay() async throws -> TestRelay {
        let relay = try await TestRelay.start()
        self.relay = relay
        return relay
    }

    /// Sends `count` messages one after another, each waiting for its outcome; `before(n)` runs
    /// before message n (1-based). Returns the texts; fails on any outcome but delivered.
    private func sendInTurn(
        _ count: Int, from client: SIMPClient, to user: String, tag: String, before: (Int) async -> Void = { _ in }
    ) async throws -> [String] {
        var texts: [String] = []
        for number in 1...count {
            await before(number)
            let text = "\(tag) \(number)"
            let result = try await client.send(text: text, to: user)
            guard case .delivered = result else {
                XCTFail("\(text): \(result)")
                return texts
            }
            texts.append(text)
        }
        return texts
    }

    private func assertArrivedOnceInOrder(_ texts: [String], at inbox: MessageInbox, file: StaticString = #filePath, line: UInt = #line) async {
        let arrived = await inbox.waitFor(texts.count, within: .seconds(10))
        try? await Task.sleep(nanoseconds: 200_000_000) // a late duplicate would show now
        let contents = await inbox.messages.map(\.content)
        XCTAssertTrue(arrived, "\(contents.count) of \(texts.count) arrived", file: file, line: line)
        XCTAssertEqual(contents, texts, "all, once, in order", file: file, line: line)
    }

    func testASenderWhoseUDPIsBlockedFromTheStartSendsAndReceivesOverTheControlConnection() async throws {
        let relay = try await startRelay()
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let bobClient = try await relay.connectClient(user: bob)
        let aliceClient = try await relay.connectClient(user: alice) { $0.udpBlock = UDPBlock(blocking: true) }
        let bobInbox = MessageInbox(bobClient), aliceInbox = MessageInbox(aliceClient)

        let toBob = try await sendInTurn(20, from: aliceClient, to: bob, tag: "to bob")
        let toAlice = try await sendInTurn(20, from: bobClient, to: alice, tag: "to alice")

        await assertArrivedOnceInOrder(toBob, at: bobInbox)
        await assertArrivedOnceInOrder(toAlice, at: aliceInbox)
        let alicePath = await aliceClient.datagramPath, bobPath = await bobClient.datagramPath
        XCTAssertEqual(alicePath, .control)
        XCTAssertEqual(bobPath, .udp)
        let stats = try await relay.server.statistics()
        XCTAssertGreaterThanOrEqual(stats.datagramsCarriedIn, 20, "alice's messages and receipt copies came in frames")
        XCTAssertGreaterThanOrEqual(stats.datagramsCarriedOut, 20, "bob's messages and receipt copies went to alice in frames")
    }

    func testBothSidesBlockedFromTheStart() async throws {
        let relay = try await startRelay()
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let bobClient = try await relay.connectClient(user: bob) { $0.udpBlock = UDPBlock(blocking: true) }
        let aliceClient = try await relay.connectClient(user: alice) { $0.udpBlock = UDPBlock(blocking: true) }
        let bobInbox = MessageInbox(bobClient), aliceInbox = MessageInbox(aliceClient)

        let toBob = try await sendInTurn(20, from: aliceClient, to: bob, tag: "to bob")
        let toAlice = try await sendInTurn(20, from: bobClient, to: alice, tag: "to alice")

        await assertArrivedOnceInOrder(toBob, at: bobInbox)
        await assertArrivedOnceInOrder(toAlice, at: aliceInbox)
        let paths = [await aliceClient.datagramPath, await bobClient.datagramPath]
        XCTAssertEqual(paths, [.control, .control])
    }

    /// bob's UDP is blocked after 50 of 200 messages, then let through again: nothing is lost,
    /// duplicated or reordered, and bob comes back to UDP (the relay's sessions on the control
    /// path go back to 0).
    func testAReceiverBlockedMidStreamLosesNothingAndComesBackToUDP() async throws {
        let relay = try await startRelay()
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let block = UDPBlock(blocking: false)
        let bobClient = try await relay.connectClient(user: bob) { $0.udpBlock = block }
        let aliceClient = try await relay.connectClient(user: alice)
        let bobInbox = MessageInbox(bobClient)

        let texts = try await sendInTurn(200, from: aliceClient, to: bob, tag: "stream") { number in
            if number == 51 { block.isBlocking = true }
        }

        await assertArrivedOnceInOrder(texts, at: bobInbox)
        let blockedPath = await bobClient.datagramPath
        XCTAssertEqual(blockedPath, .control)
        block.isBlocking = false
        let back = await Eventually.holds(within: .seconds(10)) { await bobClient.datagramPath == .udp }
        XCTAssertTrue(back, "bob probes UDP and comes back")
        let afterwards = try await sendInTurn(10, from: aliceClient, to: bob, tag: "after")
        await assertArrivedOnceInOrder(texts + afterwards, at: bobInbox)
        let onControl = try await Eventually.holds { try await relay.server.statistics().sessionsOverControl == 0 }
        XCTAssertTrue(onControl, "the relay moved bob's session back to UDP")
    }

    /// A sender blocked mid-stream: its messages in flight are sent again over the control
    /// connection.
    func testASenderBlockedMidStreamLosesNothing() async throws {
        let relay = try await startRelay()
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let block = UDPBlock(blocking: false)
        let bobClient = try await relay.connectClient(user: bob)
        let aliceClient = try await relay.connectClient(user: alice) { $0.udpBlock = block }
        let bobInbox = MessageInbox(bobClient)

        let texts = try await sendInTurn(100, from: aliceClient, to: bob, tag: "stream") { number in
            if number == 31 { block.isBlocking = true }
        }

        await assertArrivedOnceInOrder(texts, at: bobInbox)
        let path = await aliceClient.datagramPath
        XCTAssertEqual(path, .control)
    }

    /// Across two relays on one Redis: alice (relay 0) and bob (relay 1) both blocked; the
    /// datagrams cross through Redis pub/sub and the receiving relay's DATAGRAM frames.
    func testBothBlockedOnTwoRelays() async throws {
        let cluster = try await TestRelayCluster.start(relays: 2)
        self.cluster = cluster
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let aliceClient = try await cluster.connectClient(user: alice, relay: 0) { $0.udpBlock = UDPBlock(blocking: true) }
        let bobClient = try await cluster.connectClient(user: bob, relay: 1) { $0.udpBlock = UDPBlock(blocking: true) }
        let aliceInbox = MessageInbox(aliceClient), bobInbox = MessageInbox(bobClient)

        let toBob = try await sendInTurn(10, from: aliceClient, to: bob, tag: "to bob")
        let toAlice = try await sendInTurn(10, from: bobClient, to: alice, tag: "to alice")

        await assertArrivedOnceInOrder(toBob, at: bobInbox)
        await assertArrivedOnceInOrder(toAlice, at: aliceInbox)
        let stats = try await cluster.relays[1].server.statistics()
        XCTAssertGreaterThanOrEqual(stats.datagramsCarriedOut, 10, "alice's messages reached bob in frames from his relay")
    }
}
