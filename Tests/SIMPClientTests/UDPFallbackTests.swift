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

    /// alice and bob with their clients and inboxes.
    private struct Pair {
        let alice: String, bob: String
        let aliceClient: SIMPClient, bobClient: SIMPClient
        let aliceInbox: MessageInbox, bobInbox: MessageInbox

        /// Both users' inboxes start now.
        init(alice: String, _ aliceClient: SIMPClient, bob: String, _ bobClient: SIMPClient) {
            (self.alice, self.bob, self.aliceClient, self.bobClient) = (alice, bob, aliceClient, bobClient)
            (aliceInbox, bobInbox) = (MessageInbox(aliceClient), MessageInbox(bobClient))
        }
    }

    /// Who a test blocks the UDP of.
    private enum Party { case alice, bob }

    /// Connects new users bob, then alice, to `relay`; `aliceUDP` and `bobUDP` (if given) block
    /// their UDP.
    private func connectPair(on relay: TestRelay, aliceUDP: UDPBlock? = nil, bobUDP: UDPBlock? = nil) async throws -> Pair {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let bobClient = try await relay.connectClient(user: bob) { $0.udpBlock = bobUDP }
        let aliceClient = try await relay.connectClient(user: alice) { $0.udpBlock = aliceUDP }
        return Pair(alice: alice, aliceClient, bob: bob, bobClient)
    }

    /// alice sends bob `count` messages in turn, then bob sends alice `count`; each side gets
    /// all of them, once, in order.
    private func exchange(_ count: Int, in pair: Pair, file: StaticString = #filePath, line: UInt = #line) async throws {
        let toBob = try await sendInTurn(count, from: pair.aliceClient, to: pair.bob, tag: "to bob")
        let toAlice = try await sendInTurn(count, from: pair.bobClient, to: pair.alice, tag: "to alice")
        await assertArrivedOnceInOrder(toBob, at: pair.bobInbox, file: file, line: line)
        await assertArrivedOnceInOrder(toAlice, at: pair.aliceInbox, file: file, line: line)
    }

    /// On a new relay, alice streams `count` messages to bob in turn, and `blocked`'s UDP is
    /// blocked just before message `blockedFrom`: bob gets all of them, once, in order, and the
    /// blocked client's datagrams go over the control connection. Returns what the test may
    /// check further.
    private func stream(
        _ count: Int, blockingUDPOf blocked: Party, from blockedFrom: Int
    ) async throws -> (relay: TestRelay, pair: Pair, block: UDPBlock, texts: [String]) {
        let relay = try await startRelay()
        let block = UDPBlock(blocking: false)
        let pair = try await connectPair(on: relay, aliceUDP: blocked == .alice ? block : nil, bobUDP: blocked == .bob ? block : nil)
        let texts = try await sendInTurn(count, from: pair.aliceClient, to: pair.bob, tag: "stream") { number in
            if number == blockedFrom { block.isBlocking = true }
        }
        await assertArrivedOnceInOrder(texts, at: pair.bobInbox)
        let path = await (blocked == .alice ? pair.aliceClient : pair.bobClient).datagramPath
        XCTAssertEqual(path, .control, "\(blocked)'s datagrams went over the control connection")
        return (relay, pair, block, texts)
    }

    private func assertArrivedOnceInOrder(_ texts: [String], at inbox: MessageInbox, file: StaticString = #filePath, line: UInt = #line) async {
        let arrived = await inbox.waitFor(texts.count)
        _ = await Eventually.stays { await inbox.messages.count == texts.count } // quiet period: a late duplicate would show
        let contents = await inbox.messages.map(\.content)
        XCTAssertTrue(arrived, "\(contents.count) of \(texts.count) arrived", file: file, line: line)
        XCTAssertEqual(contents, texts, "all, once, in order", file: file, line: line)
    }

    func testASenderWhoseUDPIsBlockedFromTheStartSendsAndReceivesOverTheControlConnection() async throws {
        let relay = try await startRelay()
        let pair = try await connectPair(on: relay, aliceUDP: UDPBlock(blocking: true))

        try await exchange(20, in: pair)
        let alicePath = await pair.aliceClient.datagramPath, bobPath = await pair.bobClient.datagramPath
        XCTAssertEqual(alicePath, .control)
        XCTAssertEqual(bobPath, .udp)
        let stats = try await relay.server.statistics()
        XCTAssertGreaterThanOrEqual(stats.datagramsCarriedIn, 20, "alice's messages and receipt copies came in frames")
        XCTAssertGreaterThanOrEqual(stats.datagramsCarriedOut, 20, "bob's messages and receipt copies went to alice in frames")
    }

    func testBothSidesBlockedFromTheStart() async throws {
        let relay = try await startRelay()
        let pair = try await connectPair(on: relay, aliceUDP: UDPBlock(blocking: true), bobUDP: UDPBlock(blocking: true))

        try await exchange(20, in: pair)
        let paths = [await pair.aliceClient.datagramPath, await pair.bobClient.datagramPath]
        XCTAssertEqual(paths, [.control, .control])
    }

    /// bob's UDP is blocked after 50 of 200 messages, then let through again: nothing is lost,
    /// duplicated or reordered, and bob comes back to UDP (the relay's sessions on the control
    /// path go back to 0).
    func testAReceiverBlockedMidStreamLosesNothingAndComesBackToUDP() async throws {
        let (relay, pair, block, texts) = try await stream(200, blockingUDPOf: .bob, from: 51)
        block.isBlocking = false
        let back = await Eventually.holds { await pair.bobClient.datagramPath == .udp }
        XCTAssertTrue(back, "bob probes UDP and comes back")
        let afterwards = try await sendInTurn(10, from: pair.aliceClient, to: pair.bob, tag: "after")
        await assertArrivedOnceInOrder(texts + afterwards, at: pair.bobInbox)
        let onControl = try await Eventually.holds { try await relay.server.statistics().sessionsOverControl == 0 }
        XCTAssertTrue(onControl, "the relay moved bob's session back to UDP")
    }

    /// A sender blocked mid-stream: its messages in flight are sent again over the control
    /// connection.
    func testASenderBlockedMidStreamLosesNothing() async throws {
        _ = try await stream(100, blockingUDPOf: .alice, from: 31)
    }

    /// Across two relays on one Redis: alice (relay 0) and bob (relay 1) both blocked; the
    /// datagrams cross through Redis pub/sub and the receiving relay's DATAGRAM frames.
    func testBothBlockedOnTwoRelays() async throws {
        let cluster = try await TestRelayCluster.start(relays: 2)
        self.cluster = cluster
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let aliceClient = try await cluster.connectClient(user: alice, relay: 0) { $0.udpBlock = UDPBlock(blocking: true) }
        let bobClient = try await cluster.connectClient(user: bob, relay: 1) { $0.udpBlock = UDPBlock(blocking: true) }

        try await exchange(10, in: Pair(alice: alice, aliceClient, bob: bob, bobClient))
        let stats = try await cluster.relays[1].server.statistics()
        XCTAssertGreaterThanOrEqual(stats.datagramsCarriedOut, 10, "alice's messages reached bob in frames from his relay")
    }
}
