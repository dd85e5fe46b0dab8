import NIOCore
import SIMPCore
import XCTest

final class HeartbeatTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)
    private let policy = HeartbeatPolicy(interval: .seconds(5), missLimit: 3)

    func testPingsEveryIntervalAndDeclaresDeathAfterMissLimitIntervalsOfSilence() {
        var beat = Heartbeat(policy: policy, now: t0)
        XCTAssertEqual(beat.nextDeadline, t0 + .seconds(5))
        XCTAssertEqual(beat.poll(now: t0 + .seconds(4)), .none)
        XCTAssertEqual(beat.poll(now: t0 + .seconds(5)), .sendPing)
        XCTAssertEqual(beat.poll(now: t0 + .seconds(6)), .none, "one ping per interval")
        XCTAssertEqual(beat.poll(now: t0 + .seconds(10)), .sendPing)
        XCTAssertEqual(beat.poll(now: t0 + .seconds(15)), .peerDead)
    }

    func testAnythingHeardKeepsThePeerAlive() {
        var beat = Heartbeat(policy: policy, now: t0)
        beat.heard(at: t0 + .seconds(14))
        XCTAssertNotEqual(beat.poll(now: t0 + .seconds(15)), .peerDead)
        XCTAssertEqual(beat.poll(now: t0 + .seconds(29)), .peerDead)
    }

    func testTableReportsPingsAndDeathsAndForgetsTheDead() {
        var table = HeartbeatTable(policy: policy)
        let quiet = ConnectionID(1), chatty = ConnectionID(2)
        table.opened(quiet, now: t0)
        table.opened(chatty, now: t0)

        let first = table.poll(now: t0 + .seconds(5))
        XCTAssertEqual(Set(first.ping), [quiet, chatty])
        table.heard(chatty, now: t0 + .seconds(12))
        let later = table.poll(now: t0 + .seconds(15))

        XCTAssertEqual(later.dead, [quiet])
        XCTAssertEqual(table.count, 1)
        table.closed(chatty)
        XCTAssertEqual(table.count, 0)
    }
}

final class BackoffTests: XCTestCase {
    func testDelaysDoubleUpToTheCapAndResetAfterSuccess() {
        var backoff = Backoff(policy: ReconnectPolicy()) // 1 s, ×2, cap 30 s, ±20 %
        let delays = (1...7).map { _ in backoff.next(random: 0.5).delay } // 0.5 = no jitter
        XCTAssertEqual(delays, [1, 2, 4, 8, 16, 30, 30].map { TimeAmount.seconds($0) })
        XCTAssertEqual(backoff.attempt, 7)
        backoff.reset()
        XCTAssertEqual(backoff.next(random: 0.5).attempt, 1)
    }

    func testJitterStaysWithinItsBounds() {
        var low = Backoff(policy: ReconnectPolicy()), high = Backoff(policy: ReconnectPolicy())
        XCTAssertEqual(low.next(random: 0).delay, .milliseconds(800))
        XCTAssertEqual(high.next(random: 0.999_999).delay.nanoseconds, 1_200_000_000, accuracy: 10_000)
    }
}

final class SenderSuspensionTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func testSuspendedSenderNeitherSendsNorTimesOutAndResumesEverything() {
        var policy = RetransmitPolicy()
        policy.maxAttempts = 2
        var sender = ReliableSender(firstMessageId: 1, policy: policy)
        let inFlight = sender.submit(SIMPMessage(kind: .text, toUser: "bob", content: "a"), now: t0).output
        XCTAssertEqual(inFlight.transmit.count, 1)

        sender.suspend()
        let queued = sender.submit(SIMPMessage(kind: .text, toUser: "bob", content: "b"), now: t0)
        XCTAssertTrue(queued.output.transmit.isEmpty)
        XCTAssertNil(sender.nextDeadline)
        XCTAssertEqual(sender.poll(now: t0 + .seconds(60)), SenderOutput(), "no give-up while the path is down")

        let resumed = sender.resume(now: t0 + .seconds(60))

        XCTAssertEqual(resumed.transmit.map(\.content), ["a", "b"])
        XCTAssertEqual(resumed.transmit.map(\.attempt), [2, 1])
        XCTAssertNotNil(sender.nextDeadline)
    }
}

final class RelayCoreOfflineTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func testKnownUserWithoutRouteIsOfflineNotUnknown() throws {
        var core = RelayCore(configuration: .init(relayId: "r1", udpPort: 7000))
        let sender = ConnectionID(1)
        core.connectionOpened(sender)
        var connect = SIMPMessage(kind: .connect, fromUser: "alice")
        connect.udpPort = 5000
        _ = core.controlReceived(connect, on: sender, peer: try SocketAddress(ipAddress: "127.0.0.1", port: 40000))
        _ = core.registrationCompleted(sender, succeeded: true)
        let datagram = MessageCodec.encode(SIMPMessage(kind: .text, messageId: 3, fromUser: "alice", toUser: "bob"))

        XCTAssertEqual(core.datagramReceived(datagram, now: t0).count, 1, "a lookup")
        let offline = core.lookupCompleted(user: "bob", route: nil, known: true, now: t0)

        XCTAssertEqual(offline.count, 1)
        guard case .storeInInbox("bob", let stored) = offline[0] else { return XCTFail("\(offline)") }
        XCTAssertEqual(stored.messageId, 3)
        let cached = core.datagramReceived(datagram, now: t0 + .milliseconds(10))
        guard case .storeInInbox("bob", _) = cached.first else { return XCTFail("\(cached)") }
        XCTAssertEqual(cached.count, 1, "no ERROR to the sender: the message goes to the inbox")
    }
}

final class RelayCoreRebindingTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    private func connectedCore(_ user: String, ip: String, udpPort: Int) throws -> RelayCore {
        var core = RelayCore(configuration: .init(relayId: "r1", udpPort: 7000))
        let connection = ConnectionID(1)
        core.connectionOpened(connection)
        var connect = SIMPMessage(kind: .connect, fromUser: user)
        connect.udpPort = UInt32(udpPort)
        _ = core.controlReceived(connect, on: connection, peer: try SocketAddress(ipAddress: ip, port: 40000))
        _ = core.registrationCompleted(connection, succeeded: true)
        return core
    }

    func testRouteFollowsANewPortOnTheSameIP() throws {
        var core = try connectedCore("bob", ip: "10.0.0.7", udpPort: 5000)
        let keepalive = MessageCodec.encode(SIMPMessage(kind: .ping, fromUser: "bob"))
        let rebound = try SocketAddress(ipAddress: "10.0.0.7", port: 6123)

        let actions = core.datagramReceived(keepalive, from: rebound, now: t0)

        guard case .moveRoute(let user, let route, _)? = actions.first else { return XCTFail("\(actions)") }
        XCTAssertEqual(user, "bob")
        XCTAssertEqual(route.address, rebound)
        let toBob = MessageCodec.encode(SIMPMessage(kind: .text, messageId: 1, fromUser: "alice", toUser: "bob"))
        guard case .forward(_, let address)? = core.datagramReceived(toBob, now: t0).first else { return XCTFail() }
        XCTAssertEqual(address, rebound)
        XCTAssertTrue(core.datagramReceived(keepalive, from: rebound, now: t0).isEmpty, "moves once")
    }

    func testAnotherIPNeverMovesARoute() throws {
        var core = try connectedCore("bob", ip: "10.0.0.7", udpPort: 5000)
        let forged = MessageCodec.encode(SIMPMessage(kind: .ping, fromUser: "bob"))

        let actions = core.datagramReceived(forged, from: try SocketAddress(ipAddress: "10.6.6.6", port: 5000), now: t0)

        XCTAssertTrue(actions.isEmpty)
        XCTAssertEqual(core.liveRegistrations.first?.route.address, try SocketAddress(ipAddress: "10.0.0.7", port: 5000))
    }
}
