import NIOCore
import SIMPCore
import SIMPCoreTestKit
import XCTest

/// What the core reports happened (`RelayAction.event`): a session connected, a session ended
/// and why, a message stored. Each is said once, where it happens, and in order with what
/// depends on it (a message is reported stored before its sender is told so).
final class RelayCoreEventsTests: XCTestCase {
    private let t0 = DevRelay.t0
    private let c1 = ConnectionID(1), c2 = ConnectionID(2), c3 = ConnectionID(3)

    // MARK: Connected

    func testASessionIsReportedConnectedWhenCONNECTEDGoesOutAndNotBefore() throws {
        var relay = DevRelay()
        XCTAssertEqual(relay.open(c1), [])
        let register = StoreRequest.register(relay.registration("alice", on: c1, port: 5001), connection: c1)
        XCTAssertEqual(relay.control(DevRelay.connectMessage("alice", udpPort: 5001), on: c1), [.store(register)], "not connected yet")
        let completed = try relay.complete("alice", on: c1, port: 5001)
        XCTAssertEqual(completed[1], .event(.userConnected(register.registration!)), "right after CONNECTED: \(completed)")
        XCTAssertEqual(completed.filter(\.isEvent).count, 1)
    }

    func testASessionThatNeverConnectedIsNeverReported() throws {
        var relay = DevRelay()
        _ = relay.open(c1)
        let register = StoreRequest.register(relay.registration("alice", on: c1, port: 5001), connection: c1)
        _ = relay.control(DevRelay.connectMessage("alice", udpPort: 5001), on: c1)
        XCTAssertEqual(relay.fail(register, StoreFailure("down")), [.send(c1, .error(.internal, "registry unavailable, try again"))])

        _ = relay.control(DevRelay.connectMessage("alice", udpPort: 5001), on: c1)
        let limit = relay.answer(.limitReached(register, reason: "too many"))
        XCTAssertEqual(
            limit,
            [
                .reject(.limitReached, detail: "login of alice device : too many"), .send(c1, .error(.limitReached, "too many")), .close(c1),
            ])

        _ = relay.open(c2)
        _ = relay.control(DevRelay.connectMessage("bob", udpPort: 5002), on: c2)
        XCTAssertEqual(
            relay.closed(c2), [.store(.unregister(user: "bob", session: "r1/2")), .store(.recordPresence(user: "bob", online: false))],
            "closed while registering: withdrawn, but it never connected")
    }

    // MARK: Disconnected

    func testEachWayAConnectedSessionEndsIsReportedOnceWithItsReason() throws {
        var relay = DevRelay { $0.heartbeat = HeartbeatPolicy(interval: .seconds(1), missLimit: 3) }
        try relay.connect("alice", on: c1, port: 5001)
        let alice = relay.registration(of: "alice")
        XCTAssertEqual(
            relay.closed(c1),
            [
                .event(.userDisconnected(alice, .connectionClosed)), .store(.unregister(user: "alice", session: "r1/1")),
                .store(.recordPresence(user: "alice", online: false)),
            ])
        XCTAssertEqual(relay.closed(c1), [], "once")

        try relay.connect("bob", on: c2, port: 5002)
        XCTAssertEqual(
            relay.control(SIMPMessage(kind: .disconnect), on: c2),
            [
                .event(.userDisconnected(relay.registration(of: "bob"), .disconnected)), .store(.unregister(user: "bob", session: "r1/2")),
                .store(.recordPresence(user: "bob", online: false)), .close(c2),
            ])
        XCTAssertEqual(relay.closed(c2), [])

        try relay.connect("carol", on: c3, port: 5003)
        let silent = relay.tick(now: t0 + .seconds(3))
        XCTAssertEqual(silent.first, .event(.userDisconnected(relay.registration(of: "carol"), .silent)), "\(silent)")
        XCTAssertEqual(silent.filter(\.isEvent).count, 1)
    }

    func testASessionReplacedHereOrElsewhereOrEndedByTheOperatorIsReportedAndItsConnectionCloses() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: c1, port: 5001)
        let first = relay.registration(of: "alice")
        _ = relay.open(c2)
        let register = StoreRequest.register(relay.registration("alice", on: c2, port: 5002), connection: c2)
        XCTAssertEqual(
            relay.control(DevRelay.connectMessage("alice", udpPort: 5002), on: c2),
            [
                .event(.userDisconnected(first, .replaced)),
                .send(c1, .error(.alreadyConnected, "alice connected again elsewhere (a newer session of this device took over)")), .close(c1),
                .store(register),
            ])
        XCTAssertEqual(relay.closed(c1), [], "already reported and replaced: no unregister")

        try relay.complete("alice", on: c2, port: 5002)
        XCTAssertEqual(
            relay.answer(.checkSession(user: "alice", session: "r1/2", current: "r2/9")),
            [
                .event(.userDisconnected(relay.registration(of: "alice"), .replacedElsewhere)),
                .send(c2, .error(.alreadyConnected, "alice connected again on another relay")), .close(c2),
            ])

        try relay.connect("bob", on: c3, port: 5003)
        XCTAssertEqual(
            relay.answer(.checkSession(user: "bob", session: "r1/3", current: RelayCore.sessionEndedByOperator)),
            [
                .event(.userDisconnected(relay.registration(of: "bob"), .endedByOperator)),
                .send(c3, .error(.sessionEnded, "the relay's operator ended bob's session")), .close(c3),
            ])
    }

    func testAStoppingRelayReportsEveryConnectedSessionEnded() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: c1, port: 5001)
        try relay.connect("bob", on: c2, port: 5002)
        _ = relay.open(c3)
        _ = relay.control(DevRelay.connectMessage("carol", udpPort: 5003), on: c3) // registering: never connected
        let registrations = [relay.registration(of: "alice"), relay.registration(of: "bob"), relay.registration("carol", on: c3, port: 5003)]
        XCTAssertEqual(
            relay.run { $0.shutDown(now: t0, into: &$1) },
            [
                .event(.userDisconnected(registrations[0], .relayStopped)), .close(c1),
                .event(.userDisconnected(registrations[1], .relayStopped)), .close(c2), .close(c3),
                .store(.withdraw(relayId: "r1", registrations)),
            ])
        XCTAssertEqual(relay.core.connectedUsers, 0)
    }

    // MARK: Stored

    func testAMessageIsReportedStoredBeforeItsSenderIsToldAndOnlyTheFirstTime() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: c1, port: 5001)
        let message = textMessage(4, from: "alice", to: "erin")
        let entry = InboxEntry(message: message, storedAt: 1)
        let stored = InboxStored(user: "erin", from: "alice", messageId: 4, kind: .text)
        XCTAssertEqual(
            relay.answer(.storeInInbox(user: "erin", message: message, entry, InboxStoreResult(duplicate: false))),
            [.event(.inboxStored(stored)), .send(c1, statusReceipt(4, from: "erin", to: "alice", .stored)), .store(.lookup(user: "erin"))],
            "durable, then receipted")
        XCTAssertEqual(
            relay.answer(.storeInInbox(user: "erin", message: message, entry, InboxStoreResult(duplicate: true))),
            [.send(c1, statusReceipt(4, from: "erin", to: "alice", .stored))], "a retransmission the store already held")
        var full = InboxStoreResult(duplicate: false)
        full.refused = true
        let refused = relay.answer(.storeInInbox(user: "erin", message: textMessage(5, from: "alice", to: "erin"), entry, full))
        XCTAssertFalse(refused.contains(where: \.isEvent), "refused by a full inbox: not stored, \(refused)")
        XCTAssertEqual(
            relay.fail(.storeInInbox(user: "erin", message: message), StoreFailure("down")),
            [.reject(.inboxUnavailable, detail: "alice -> erin (\(SIMPMessage.Kind.text))")])
    }
}

extension RelayAction {
    /// Whether this is a report (`.event`).
    var isEvent: Bool {
        if case .event = self { return true }
        return false
    }
}
