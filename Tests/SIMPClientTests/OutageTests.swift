import Foundation
import NIOConcurrencyHelpers
import NIOCore
import SIMPClient
import SIMPCore
import SIMPLocalServers
import SIMPTestSupport
import XCTest

/// With real processes, a short outage fails no message. The relay is a
/// `simp-server` process, bob a `simp listen` process, alice the client library; every message
/// reaches bob once and in order, alice is told delivered for each, and the relay refuses none
/// for alice's content rate (`simp_rejected_total{reason="message_rate_limited"}`).
final class OutageTests: StoryProcessTestCase {
    /// A message every 5 ms; alice's datagrams to the relay pass a proxy that drops 2 % of them
    /// and, from 2 s to 14 s, all of them (a 12 s blackout: 2,400 messages submitted meanwhile,
    /// more than the 1,024 in-flight window). bob is the client library with its defaults (as
    /// `simp chat` runs it: held messages receipted on arrival).
    func testAFastSenderThroughATwelveSecondBlackoutLosesNothing() async throws {
        let (alice, bob) = (TestRelay.uniqueUser("alice"), TestRelay.uniqueUser("bob"))
        let (server, metricsPort) = try await startRelayProcess()
        let receiver = try await connect(bob, to: server.port)
        let inbox = MessageInbox(receiver)
        let dark = NIOLockedValueBox(false)
        let proxy = try await DatagramProxy.start(target: try SocketAddress(ipAddress: "127.0.0.1", port: server.udpPort)) { _, _ in
            dark.withLockedValue { $0 } || Double.random(in: 0..<1) < 0.02 ? 0 : 1
        }
        let sender = try await connect(alice, to: server.port) { $0.datagramTarget = proxy.address }

        let total = 3000, outcomes = Outcomes()
        let texts = try await sendPaced(total, from: sender, to: bob, tag: "blackout", every: .milliseconds(5), into: outcomes) { number in
            if number == 400 { dark.withLockedValue { $0 = true } } // 2 s in
            if number == 2800 { dark.withLockedValue { $0 = false } } // 12 s later
        }

        try await assertDeliveredOnceInOrder(texts, outcomes: outcomes) { await inbox.messages.map(\.content) }
        let refused = try await rateLimitRefusals(metricsPort)
        XCTAssertEqual(refused, 0, "content refused for alice's rate")
        let counts = try await proxy.counts()
        print(
            "story 6 blackout: \(total) messages, proxy saw \(counts.seen) content datagrams and dropped \(counts.dropped); "
                + "relay refusals \(refused); \(await outcomes.summary)")
        await sender.close()
        await receiver.close()
        await proxy.stop()
    }

    /// The same blackout with bob's `simp listen` process as the receiver (it receipts a held
    /// message only once printed, so the sender's fast retransmit sees fewer receipts).
    func testAFastSenderThroughATwelveSecondBlackoutLosesNothingToSimpListen() async throws {
        let (alice, bob) = (TestRelay.uniqueUser("alice"), TestRelay.uniqueUser("bob"))
        let (server, _) = try await startRelayProcess()
        let receiver = try await startListening(bob, server: "127.0.0.1:\(server.port)")
        let dark = NIOLockedValueBox(false)
        let proxy = try await DatagramProxy.start(target: try SocketAddress(ipAddress: "127.0.0.1", port: server.udpPort)) { _, _ in
            dark.withLockedValue { $0 } || Double.random(in: 0..<1) < 0.02 ? 0 : 1
        }
        let sender = try await connect(alice, to: server.port) { $0.datagramTarget = proxy.address }

        let outcomes = Outcomes()
        let texts = try await sendPaced(3000, from: sender, to: bob, tag: "listen", every: .milliseconds(5), into: outcomes) { number in
            if number == 400 { dark.withLockedValue { $0 = true } }
            if number == 2800 { dark.withLockedValue { $0 = false } }
        }
        try await assertDeliveredOnceInOrder(texts, outcomes: outcomes) { self.printed(by: [receiver]) }
        await sender.close()
        await proxy.stop()
    }

    /// 150 messages a second; the relay process is stopped (SIGSTOP) for 4 s once 450 arrived (3 s in).
    func testARelayPausedForFourSecondsFailsAndRefusesNothing() async throws {
        let (alice, bob) = (TestRelay.uniqueUser("alice"), TestRelay.uniqueUser("bob"))
        let (server, metricsPort) = try await startRelayProcess()
        let receiver = try await startListening(bob, server: "127.0.0.1:\(server.port)")
        let sender = try await connect(alice, to: server.port)

        let total = 2000, outcomes = Outcomes()
        let sending = Task {
            try await sendPaced(total, from: sender, to: bob, tag: "pause", every: .nanoseconds(1_000_000_000 / 150), into: outcomes)
        }
        let underWay = await Eventually.holds { self.printed(by: [receiver]).count >= 450 }
        XCTAssertTrue(underWay, receiver.standardError)
        server.process.signal(SIGSTOP)
        try await Task.sleep(nanoseconds: 4_000_000_000) // the outage itself: the relay does nothing for 4 s
        server.process.signal(SIGCONT)
        let texts = try await sending.value

        try await assertDeliveredOnceInOrder(texts, outcomes: outcomes) { self.printed(by: [receiver]) }
        let refused = try await rateLimitRefusals(metricsPort)
        XCTAssertEqual(refused, 0, "content refused for alice's rate (retransmissions are charged once, new messages paced)")
        print("story 6 relay pause: \(total) messages, relay refusals \(refused); \(await outcomes.summary)")
        await sender.close()
    }

    // MARK: - Helpers

    /// Starts `simp-server` on free ports with this test's Redis and a metrics endpoint.
    private func startRelayProcess() async throws -> (server: (process: ChildProcess, port: Int, udpPort: Int), metricsPort: Int) {
        let port = try FreePort.tcp(), udpPort = try FreePort.udp(), metricsPort = try FreePort.tcp()
        let process = try await startServer([
            "--port", String(port), "--udp-port", String(udpPort), "--metrics-port", String(metricsPort),
            "--redis", relay.redis.url.description, "--relay-id", "outage-\(UInt32.random(in: .min ... .max))",
        ])
        return ((process, port, udpPort), metricsPort)
    }

    /// `user`'s client library session on the relay process at `port`, with the client's default
    /// retransmission policy and pacing.
    private func connect(_ user: String, to port: Int, configure: (inout ClientConfiguration) -> Void = { _ in }) async throws -> SIMPClient {
        try await relay.addUser(user)
        var configuration = TestRelay.clientConfiguration(user: user, port: port)
        // The client's own policy, not the tests' quick one: with its count limit (maxAttempts
        // 6, give-up by count as clients once did) 986 of 3,000 fail in the blackout and 429 of
        // 2,000 in the pause.
        configuration.retransmit = RetransmitPolicy()
        configure(&configuration)
        let client = SIMPClient(configuration: configuration)
        try await client.connect()
        return client
    }

    /// Every text printed once, in the order sent; every outcome known and delivered.
    private func assertDeliveredOnceInOrder(
        _ texts: [String], outcomes: Outcomes, within limit: TimeAmount = storyBound,
        file: StaticString = #filePath, line: UInt = #line,
        received: () async -> [String]
    ) async throws {
        try await assertEveryMessageOnce(texts, within: limit, file: file, line: line, received: received)
        let seen = await received()
        let position = Dictionary(uniqueKeysWithValues: texts.enumerated().map { ($1, $0) })
        let order = seen.compactMap { position[$0] }
        let outOfOrder = zip(order, order.dropFirst()).filter { $0 > $1 }.map { "\(texts[$0]) before \(texts[$1])" }
        XCTAssertEqual(outOfOrder, [], "printed out of order", file: file, line: line)
        let settled = await Eventually.holds { await outcomes.count == texts.count }
        let known = await outcomes.count, failed = await outcomes.failed
        XCTAssertTrue(settled, "outcomes known: \(known) of \(texts.count)", file: file, line: line)
        XCTAssertEqual(failed.count, 0, "failed: \(failed.prefix(10))", file: file, line: line)
    }
}
