import NIOCore
import SIMPCore
import SIMPCoreTestKit
import XCTest

/// Connections that never log in: the login deadline closes them, and the caps on connections
/// not logged in (per address and in all) keep them from filling the relay.
final class LoginDeadlineTests: XCTestCase {
    private let t0 = DevRelay.t0

    private func relay(_ change: (inout RelayLimits) -> Void = { _ in }) -> DevRelay {
        DevRelay { configuration in
            configuration.heartbeat.slot = .zero
            change(&configuration.limits)
        }
    }

    private static func from(_ ip: String, _ port: Int = 40_000) -> SocketAddress { try! SocketAddress(ipAddress: ip, port: port) }

    func testAConnectionThatNeverLogsInIsClosedAtTheLoginDeadline() throws {
        var relay = relay()
        XCTAssertEqual(relay.open(ConnectionID(1)), [])
        XCTAssertLessThanOrEqual(relay.core.nextDeadline, t0 + .seconds(10), "the core wakes up by the login deadline")
        XCTAssertEqual(relay.tick(now: t0 + .milliseconds(9_999)), [])
        XCTAssertEqual(
            relay.tick(now: t0 + .seconds(10)),
            [.reject(.loginTimeout, detail: "c1 not logged in within 10 s"), .close(ConnectionID(1))])
        XCTAssertEqual(relay.core.openConnections, 0)
        XCTAssertEqual(relay.tick(now: t0 + .seconds(20)), [], "closed once")
    }

    func testALoginUnderWayIsClosedAtTheDeadlineToo() {
        var relay = relay()
        _ = relay.open(ConnectionID(1))
        var auth = SIMPMessage(kind: .auth, fromUser: "alice")
        auth.nonce = Array(repeating: 7, count: 24)
        XCTAssertFalse(relay.control(auth, on: ConnectionID(1), now: t0 + .seconds(1)).isEmpty, "a CHALLENGE")
        XCTAssertEqual(
            relay.tick(now: t0 + .seconds(10)),
            [.reject(.loginTimeout, detail: "c1 not logged in within 10 s"), .close(ConnectionID(1))],
            "a CHALLENGE never answered does not keep the connection")
    }

    func testALoggedInConnectionIsNotClosed() throws {
        var relay = relay()
        try relay.connect("alice", on: ConnectionID(1), port: 50_000)
        XCTAssertEqual(relay.tick(now: t0 + .seconds(11)), [])
        XCTAssertTrue(relay.core.isConnected("alice"))
    }

    func testAFailedRegistrationStartsANewDeadline() throws {
        var relay = relay()
        _ = relay.open(ConnectionID(1))
        let register = relay.control(DevRelay.connectMessage("alice", udpPort: 50_000), on: ConnectionID(1), now: t0 + .seconds(9))
        guard case .store(let request)? = register.last else { return XCTFail("\(register)") }
        _ = relay.tick(now: t0 + .seconds(10)) // the first deadline passes while it registers
        _ = relay.fail(request, StoreFailure("down"), now: t0 + .seconds(12))
        XCTAssertEqual(relay.tick(now: t0 + .seconds(21)), [], "ten seconds from the failure")
        XCTAssertEqual(
            relay.tick(now: t0 + .seconds(22)),
            [.reject(.loginTimeout, detail: "c1 not logged in within 10 s"), .close(ConnectionID(1))])
    }

    func testConnectionsNotLoggedInAreCappedPerAddress() throws {
        var relay = relay { $0.maxUnauthenticatedPerHost = 2 }
        let attacker = Self.from("127.0.0.9")
        XCTAssertEqual(relay.open(ConnectionID(1), peer: attacker), [])
        XCTAssertEqual(relay.open(ConnectionID(2), peer: attacker), [])
        let refused = relay.open(ConnectionID(3), peer: attacker)
        XCTAssertEqual(refused.first, .reject(.unauthenticatedLimit, detail: "c3 from 127.0.0.9"))
        XCTAssertEqual(refused.last, .close(ConnectionID(3)))
        guard case .send(_, let error) = refused[1] else { return XCTFail("\(refused)") }
        XCTAssertEqual(error.errorCode, .rateLimited)
        XCTAssertEqual(error.errorText, "too many connections that have not logged in from 127.0.0.9, retry in 1 s")
        XCTAssertEqual(relay.open(ConnectionID(4)), [], "another address is not affected")
        _ = relay.closed(ConnectionID(3))
        // A connection that logs in no longer counts.
        try relay.connect("alice", on: ConnectionID(5), port: 50_000, peer: Self.from("127.0.0.9", 1))
        _ = relay.closed(ConnectionID(1))
        XCTAssertEqual(relay.open(ConnectionID(6), peer: attacker), [], "alice's session does not count, c1 left")
    }

    func testAnAddressAtItsCapHasItsNextConnectionRefusedBeforeItIsSetUp() throws {
        var relay = relay { $0.maxUnauthenticatedPerHost = 2 }
        let attacker = Self.from("127.0.0.9")
        var counted: [RelayAction] = []
        XCTAssertFalse(relay.core.refusesAccepted(from: "127.0.0.9", into: &counted))
        XCTAssertEqual(relay.open(ConnectionID(1), peer: attacker), [])
        XCTAssertEqual(relay.open(ConnectionID(2), peer: attacker), [])
        XCTAssertTrue(relay.core.refusesAccepted(from: "127.0.0.9", into: &counted))
        XCTAssertEqual(counted, [.reject(.unauthenticatedLimit, detail: "a connection from 127.0.0.9 closed as accepted: 2 not logged in")])
        XCTAssertFalse(relay.core.refusesAccepted(from: "127.0.0.1", into: &counted), "another address is not affected")
        _ = relay.closed(ConnectionID(1))
        XCTAssertFalse(relay.core.refusesAccepted(from: "127.0.0.9", into: &counted), "below its cap again")
        XCTAssertEqual(counted.count, 1)
    }

    func testAtTheRelaysCapTheOldestConnectionNotLoggedInIsClosed() throws {
        var relay = relay { $0.maxUnauthenticated = 3 }
        try relay.connect("alice", on: ConnectionID(4), port: 50_000)
        for id in 1...3 as ClosedRange<UInt64> {
            XCTAssertEqual(relay.open(ConnectionID(id), peer: Self.from("127.0.0.\(id + 10)"), now: t0 + .milliseconds(Int64(id))), [])
        }
        XCTAssertEqual(
            relay.open(ConnectionID(5), peer: Self.from("127.0.0.20"), now: t0 + .milliseconds(5)),
            [.reject(.unauthenticatedLimit, detail: "c1 closed: 3 connections wait for a login"), .close(ConnectionID(1))],
            "a fourth connection waiting for a login closes the oldest (alice's session does not count)")
        XCTAssertEqual(relay.core.openConnections, 4)
        XCTAssertTrue(relay.core.isConnected("alice"))
        XCTAssertEqual(
            relay.open(ConnectionID(6), peer: Self.from("127.0.0.21"), now: t0 + .milliseconds(6)),
            [.reject(.unauthenticatedLimit, detail: "c2 closed: 3 connections wait for a login"), .close(ConnectionID(2))])
    }
}
