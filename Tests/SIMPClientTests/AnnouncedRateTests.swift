import Foundation
import NIOCore
import SIMPClient
import SIMPCore
import SIMPLocalServers
import SIMPTestSupport
import XCTest

/// A relay started with a raised `--message-rate` announces it in CONNECTED
/// (`messageRateLimit`, docs/PROTOCOL.md §4.2), and its clients pace at 90 % of it instead of
/// the default 450 per second; a backlog far past its burst is paced under it, and the
/// relay refuses none of it for the user's rate. (How fast a backlog goes out under each pace
/// is `AnnouncedPacingTests` in virtual time; no wall-clock figure is asserted here.)
final class AnnouncedRateTests: StoryProcessTestCase {
    func testAClientOfARelayWithARaisedRatePacesUnderItsAnnouncementAndIsNeverRefused() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let port = try FreePort.tcp(), udpPort = try FreePort.udp(), metricsPort = try FreePort.tcp()
        _ = try await startServer([
            "--port", String(port), "--udp-port", String(udpPort), "--metrics-port", String(metricsPort),
            "--redis", relay.redis.url.description, "--relay-id", "rate-\(UInt32.random(in: .min ... .max))",
            "--message-rate", "5000",
        ])
        let receiver = try await connect(bob, to: port)
        let inbox = MessageInbox(receiver)
        let sender = try await connect(alice, to: port)

        let paced = try await sender.statistics().pacing
        XCTAssertEqual(paced, RateLimit(perSecond: 4500, burst: 100), "90 % of the announced 5,000/s, not the default 450/s")
        XCTAssertNotEqual(paced, ClientSession.defaultPacing)

        let total = 3000 // thirty times the paced burst: most of it waits for the pacer
        var results: [EventLoopFuture<SendResult>] = []
        for number in 1...total {
            results.append(try await sender.submit(SIMPMessage(kind: .text, toUser: bob, content: "rate \(number)")).result)
        }
        var delivered = 0
        for result in results { if case .delivered = try await result.get() { delivered += 1 } }

        XCTAssertEqual(delivered, total)
        let arrived = await inbox.waitFor(total)
        XCTAssertTrue(arrived)
        let distinct = Set(await inbox.messages.map(\.content)).count
        XCTAssertEqual(distinct, total, "each once")
        let refused = try await rateLimitRefusals(metricsPort)
        XCTAssertEqual(refused, 0, "nothing refused for alice's rate")
        let statistics = try await sender.statistics()
        XCTAssertEqual(statistics.rateLimitRefusals, 0, "alice was never told RATE_LIMITED")
        XCTAssertEqual(statistics.pacing, paced, "the pace never had to come down")
        await sender.close()
        await receiver.close()
    }

    /// `user`'s client library session on the relay process at `port`, with the client's own
    /// retransmission policy and its default pacing configuration.
    private func connect(_ user: String, to port: Int) async throws -> SIMPClient {
        try await relay.addUser(user)
        var configuration = TestRelay.clientConfiguration(user: user, port: port)
        configuration.retransmit = RetransmitPolicy()
        let client = SIMPClient(configuration: configuration)
        try await client.connect()
        return client
    }
}
