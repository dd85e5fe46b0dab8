import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SIMPClient
import SIMPCore
import SIMPNIO
import SIMPRelay
import SIMPTestSupport
import XCTest

/// Heartbeats both ways, reconnecting, and resuming without loss.
final class LivenessTests: XCTestCase {
    var relay: TestRelay!
    /// Fast heartbeats so the tests see deaths within a second.
    let fastHeartbeat = HeartbeatPolicy(interval: .milliseconds(100), missLimit: 3)

    override func setUp() async throws {
        relay = try await TestRelay.start { [fastHeartbeat] in $0.heartbeat = fastHeartbeat }
    }

    override func tearDown() async throws {
        await relay.stop()
    }

    func testSilentClientIsDroppedWithinTheDocumentedTimeAndUnregistered() async throws {
        let mallory = TestRelay.uniqueUser("mallory")
        let peer = RawControlConnection()
        defer { Task { await peer.close() } }
        try await peer.connect(port: relay.port)
        try await relay.addUser(mallory)
        try await peer.login(user: mallory, password: TestRelay.password(for: mallory), udpPort: 9)
        let registered = try await Eventually.holds {
            try await self.relay.inspector.command(["EXISTS", "simp:user:{\(mallory)}"]).integer == 1
        }
        XCTAssertTrue(registered)
        // The raw peer never answers PING: dead after 3 × 100 ms (+ one check interval). How
        // soon is EngineTests' (virtual time); here only that it happens, with a bound for load.
        let dropped = await Eventually.holds(within: .seconds(30)) { peer.isClosed }

        XCTAssertTrue(dropped)
        let pings = try await peer.received().filter { $0.kind == .ping }
        XCTAssertGreaterThanOrEqual(pings.count, 2, "the relay pinged before giving up")
        let keyGone = try await Eventually.holds {
            try await self.relay.inspector.command(["EXISTS", "simp:user:{\(mallory)}"]).integer == 0
        }
        XCTAssertTrue(keyGone)
        let stats = try await relay.server.statistics()
        XCTAssertEqual(stats.rejected[.heartbeatTimeout], 1)
    }

    // A client answering PINGs stays connected: EmbeddedEngineTests, in virtual time.

    func testClientsReconnectAfterARelayRestartAndNothingIsLostOrDuplicated() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let bobClient = try await relay.connectClient(user: bob)
        let inbox = MessageInbox(bobClient)
        let aliceClient = try await relay.connectClient(user: alice)
        var states = aliceClient.connectionStates.makeAsyncIterator()
        let before = try await aliceClient.send(text: "before", to: bob)
        guard case .delivered = before else { return XCTFail("\(before)") }

        let restart = Task { [relay = relay!] in try await relay.restart(downtime: .milliseconds(300)) }
        var seen: [ConnectionState] = []
        while let state = await states.next() { // the relay is down now: alice's client lost it
            seen.append(state)
            if case .reconnecting = state { break }
        }
        var during: [EventLoopFuture<SendResult>] = []
        for text in ["during 1", "during 2", "during 3"] {
            during.append(try await aliceClient.submit(SIMPMessage(kind: .text, toUser: bob, content: text)).result)
        }
        try await restart.value

        for outcome in during {
            // Delivered, or stored if bob was not back yet (then delivered from his inbox).
            let result = try await outcome.get()
            switch result {
            case .delivered, .stored: break
            default: return XCTFail("\(result)")
            }
        }
        let all = await inbox.waitFor(4)
        XCTAssertTrue(all)
        _ = await Eventually.stays { await inbox.messages.count == 4 } // quiet period: room for a duplicate to show up
        let contents = await inbox.messages.map(\.content)
        XCTAssertEqual(contents, ["before", "during 1", "during 2", "during 3"])

        while let state = await states.next() {
            seen.append(state)
            if case .connected = state { break }
        }
        XCTAssertEqual(seen.first, .connecting)
        XCTAssertTrue(seen.contains { if case .reconnecting = $0 { return true } else { return false } }, "\(seen)")
        XCTAssertEqual(seen.last, .connected(relayId: relay.server.configuration.relayId))
    }

    func testMessageToAnOfflineKnownUserIsStoredNotRefused() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let bobClient = try await relay.connectClient(user: bob)
        await bobClient.close()
        let aliceClient = try await relay.connectClient(user: alice) {
            $0.retransmit.maxAttempts = 3
            $0.retransmit.initialRTO = .milliseconds(60)
        }

        let result = try await aliceClient.send(text: "are you back?", to: bob)

        guard case .stored = result else { return XCTFail("bob is offline, not unknown: stored for him, got \(result)") }
        let stats = try await relay.server.statistics()
        XCTAssertEqual(stats.inboxStored, 1)
        XCTAssertNil(stats.rejected[.unknownRecipient])
    }

    func testClientGivesUpASilentRelayAndReconnects() async throws {
        let silentRelay = try await SilentRelay.start()
        defer { Task { await silentRelay.stop() } }
        var configuration = ClientConfiguration(serverHost: "127.0.0.1", serverPort: silentRelay.port, user: "carol")
        configuration.localHost = "127.0.0.1"
        configuration.heartbeat = fastHeartbeat
        configuration.reconnect?.initialDelay = .seconds(60) // observe the first reconnect decision only
        let client = SIMPClient(configuration: configuration)
        defer { Task { await client.close() } }
        var states = client.connectionStates.makeAsyncIterator()
        try await client.connect()

        let connectedAt = NIODeadline.now()
        var seen: [ConnectionState] = []
        while let state = await states.next() {
            seen.append(state)
            if case .reconnecting = state { break }
        }
        let silence = NIODeadline.now() - connectedAt

        XCTAssertEqual(seen.count, 3, "\(seen)")
        XCTAssertEqual(seen[1], .connected(relayId: "silent"))
        XCTAssertLessThan(silence, .seconds(1), "noticed after \(silence)")
        let pings = try await silentRelay.pingsReceived()
        XCTAssertGreaterThanOrEqual(pings, 2)
    }
}

/// A relay that lets anyone log in (like a development relay) and then answers nothing, not
/// even PING.
final class SilentRelay: @unchecked Sendable { // `channel` is set once, by `start`, before use
    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    private var channel: Channel!
    private let handler = Handler()
    var port: Int { channel.localAddress!.port! }

    static func start() async throws -> SilentRelay {
        let relay = SilentRelay()
        relay.channel = try await ServerBootstrap(group: relay.group)
            .childChannelInitializer { [handler = relay.handler] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addSIMPControlHandlers(maxFrameSize: 65536, handler)
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return relay
    }

    func pingsReceived() async throws -> Int {
        handler.pings.withLockedValue { $0 }
    }

    func stop() async {
        try? await channel.close()
        try? await group.shutdownGracefully()
    }

    private final class Handler: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = SIMPMessage
        /// Shared by every connection's pipeline and read by the test, hence the lock.
        let pings = NIOLockedValueBox(0)

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard let message = try? MessageCodec.decode(unwrapInboundIn(data)) else { return }
            switch message.kind {
            case .auth:
                var challenge = SIMPMessage(kind: .challenge, toUser: message.fromUser)
                challenge.nonce = Array(repeating: 7, count: 16) // iterations 0: no password
                context.writeAndFlush(wrapOutboundOut(challenge), promise: nil)
            case .connect:
                var connected = SIMPMessage(kind: .connected, toUser: message.fromUser)
                connected.udpPort = 9
                connected.sessionId = 1
                connected.sessionSecret = Array(repeating: 1, count: 32)
                connected.relayId = "silent"
                context.writeAndFlush(wrapOutboundOut(connected), promise: nil)
            case .ping:
                pings.withLockedValue { $0 += 1 }
            default:
                break
            }
        }
    }
}

extension SendResult {
    var failure: DeliveryFailure? {
        if case .failed(_, let failure) = self { return failure }
        return nil
    }
}

/// The registry heals itself when Redis restarts empty.
final class RedisRestartTests: XCTestCase {
    func testRegistrationsAreRecreatedAfterARedisRestartAndMessagesFlow() async throws {
        let redis = try await RedisServerProcess.startPrivate()
        let relay = try await TestRelay.start(redis: redis) { $0.registrationTTLSeconds = 3 } // refresh every 1 s
        defer { Task { await relay.stop() } }
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        _ = try await relay.connectClient(user: bob)
        let aliceClient = try await relay.connectClient(user: alice)

        try await redis.restart()
        _ = try? await relay.inspector.command(["PING"]) // the inspector's old connection died with Redis; this reconnects it
        let empty = try await relay.inspector.command(["EXISTS", "simp:user:{\(bob)}"]).integer
        XCTAssertEqual(empty, 0, "a restarted Redis without persistence has lost the registration")

        let healed = try await Eventually.holds {
            try await relay.inspector.command(["EXISTS", "simp:user:{\(bob)}", "simp:user:{\(alice)}"]).integer == 2
        }
        XCTAssertTrue(healed, "the refresh cycle re-creates live registrations")
        let result = try await aliceClient.send(text: "after the Redis restart", to: bob)
        guard case .delivered = result else { return XCTFail("\(result)") }
    }
}
