import Foundation
import NIOCore
import SIMPCore
import SIMPTestSupport
import XCTest

@testable import SIMPBench

/// `--sessions`: idle users spread over relays and source addresses, held by worker
/// processes, coming back as the reference client does when their relay goes away.
final class IdleSessionsTests: XCTestCase {
    func testSessionsTakeTheRelaysAndSourceAddressesInTurn() {
        let relays = [HostPort(host: "127.0.0.1", port: 7000), HostPort(host: "127.0.0.1", port: 7001), HostPort(host: "127.0.0.1", port: 7002)]
        let plan = IdleSessionPlan(relays: relays, sourceHosts: ["127.0.0.1", "127.0.0.2"], first: 10, count: 7, prefix: "p")
        XCTAssertEqual(plan.relay(of: 10, afterFailures: 0), relays[1])
        XCTAssertEqual(plan.relay(of: 10, afterFailures: 1), relays[2], "an unreachable relay: the next one")
        XCTAssertEqual(plan.relay(of: 10, afterFailures: 2), relays[0])
        XCTAssertEqual(plan.sourceHost(of: 10), "127.0.0.1")
        XCTAssertEqual(plan.sourceHost(of: 11), "127.0.0.2")
        XCTAssertEqual((0..<3).map { plan.sessions(onRelay: $0) }, [2, 3, 2]) // sessions 10…16

        var homed = plan
        homed.home = 0
        XCTAssertEqual((0..<3).map { homed.sessions(onRelay: $0) }, [7, 0, 0])
        XCTAssertEqual(homed.relay(of: 11, afterFailures: 0), relays[0])
        XCTAssertEqual([10, 11].map { homed.relay(of: $0, afterFailures: 1) }, [relays[1], relays[2]], "away from home: spread over the others")
        homed.failover = false
        XCTAssertEqual(homed.relay(of: 11, afterFailures: 3), relays[0], "no failover: always home")
    }

    func testWorkersSplitTheSessionsEvenlyWithinTheirLimit() {
        XCTAssertEqual(SessionWorkers.split(count: 0, first: 0), [])
        XCTAssertEqual(SessionWorkers.split(count: 100, first: 5), [5..<105])
        let shares = SessionWorkers.split(count: 68_000, first: 0)
        XCTAssertEqual(shares.count, 5)
        XCTAssertTrue(shares.allSatisfy { $0.count <= SessionWorkers.perWorker })
        XCTAssertEqual(shares.first?.lowerBound, 0)
        XCTAssertEqual(shares.last?.upperBound, 68_000)
        XCTAssertTrue(zip(shares, shares.dropFirst()).allSatisfy { $0.upperBound == $1.lowerBound })
    }

    func testWorkerReportsAreSplitIntoLinesWhereverTheReadsCut() {
        let lines = LineSplitter()
        XCTAssertEqual(lines.feed(Data("connected 1".utf8)), [])
        XCTAssertEqual(lines.feed(Data("2\nconnected 13\nerr".utf8)), ["connected 12", "connected 13"])
        XCTAssertEqual(lines.feed(Data("or x\n".utf8)), ["error x"])
    }

    /// Relay 0 restarts: its sessions come back to it; relay 0 stops for good: they move to
    /// relay 1. Before the bench reconnected, a dropped idle session stayed gone.
    func testSessionsComeBackWhenTheirRelayRestartsAndMoveWhenItIsGone() async throws {
        let cluster = try await TestRelayCluster.start(relays: 2) { _, configuration in configuration.requireLogin = false }
        func plan(failover: Bool) -> IdleSessionPlan {
            var plan = IdleSessionPlan(
                relays: cluster.relays.map { HostPort(host: "127.0.0.1", port: $0.port) }, sourceHosts: ["127.0.0.1", "127.0.0.2"],
                count: 6, prefix: "idle-\(UInt32.random(in: .min ... .max))")
            plan.reconnect.initialDelay = .milliseconds(50)
            plan.reconnect.maxDelay = .milliseconds(200)
            plan.failover = failover
            return plan
        }
        let users = { (relay: Int) async throws -> Int in try await cluster.relays[relay].server.statistics().connectedUsers }
        let staying = IdleSessions(plan: plan(failover: false))
        let moving = IdleSessions(plan: plan(failover: true))
        do {
            let connected = try await staying.connect()
            XCTAssertEqual(connected, 6)
            let first = try await users(0), second = try await users(1)
            XCTAssertEqual([first, second], [3, 3])
            try await cluster.relays[0].restart(downtime: .milliseconds(300))
            try await waitUntil("3 sessions back on the restarted relay") { try await users(0) == 3 && staying.connected == 6 }
            await staying.close()

            _ = try await moving.connect()
            try await waitUntil("3 and 3") {
                let first = try await users(0), second = try await users(1)
                return first == 3 && second == 3
            }
            await cluster.relays[0].server.shutdown()
            try await waitUntil("every session on relay 1") { try await users(1) == 6 && moving.connected == 6 }
        } catch {
            await staying.close()
            await moving.close()
            await cluster.stop()
            throw error
        }
        await moving.close()
        await cluster.stop()
    }

    /// Waits for `condition` up to `Eventually.generousBound` (a functional wait, not a speed check).
    private func waitUntil(_ what: String, _ condition: () async throws -> Bool) async throws {
        if try await Eventually.holds(condition) { return }
        XCTFail("not within \(Eventually.generousBound): \(what)")
    }
}
