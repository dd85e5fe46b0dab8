import NIOCore
import XCTest

@testable import SIMPCore

/// `RelayTimers` on its own: each deadline it keeps moves only through its own methods.
final class RelayTimersTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    /// Defaults: refresh every 10 s (1 s a slice), drain quiet period 500 ms.
    private func timers() -> RelayTimers {
        RelayTimers(configuration: RelayCore.Configuration(relayId: "r1", udpPort: 9000), now: t0)
    }

    func testRefreshesWaitUntilTheRelayListensThenCycleThroughTheSlicesUntilItStops() {
        var timers = timers()
        XCTAssertFalse(timers.isRefreshDue(now: t0 + .hours(1)), "not listening yet")
        timers.listening(at: "udp 127.0.0.1:9000")
        XCTAssertEqual(timers.description, "udp 127.0.0.1:9000")

        let slice = TimeAmount.seconds(1)
        var slices: [Int] = []
        for turn in 0..<(RelayTimers.refreshSlices + 2) {
            let now = t0 + slice * Int64(turn)
            slices.append(timers.refreshSent(now: now))
            XCTAssertEqual(timers.nextRefresh, now + slice)
            XCTAssertFalse(timers.isRefreshDue(now: now + slice - .nanoseconds(1)))
            XCTAssertTrue(timers.isRefreshDue(now: now + slice))
        }
        XCTAssertEqual(slices, Array(0..<RelayTimers.refreshSlices) + [0, 1], "every group once per interval, in turn")

        timers.stopRefreshing()
        XCTAssertNil(timers.nextRefresh)
        XCTAssertFalse(timers.isRefreshDue(now: t0 + .hours(1)))
    }

    func testTheHeartbeatCheckMovesOnlyOnceDueAndPingIdsCountUp() {
        var timers = timers()
        let first = timers.nextHeartbeatCheck
        timers.heartbeatsChecked(now: first - .nanoseconds(1))
        XCTAssertEqual(timers.nextHeartbeatCheck, first, "checked early (another deadline): the periodic check stays")
        timers.heartbeatsChecked(now: first + .milliseconds(3))
        XCTAssertEqual(timers.nextHeartbeatCheck, first + .milliseconds(3) + timers.heartbeatCheckPeriod)
        XCTAssertEqual([timers.takePingId(), timers.takePingId(), timers.takePingId()], [1, 2, 3])
    }

    func testADrainEndsOnceAfterAQuietPeriodWithoutReceipts() {
        var timers = timers()
        XCTAssertFalse(timers.isDraining)
        XCTAssertFalse(timers.finishDrain(now: t0, connectionsLeft: 0), "no drain, nothing to finish")
        timers.beginDrain(until: t0 + .seconds(5), now: t0)
        timers.beginDrain(until: t0 + .seconds(1), now: t0)
        XCTAssertTrue(timers.isDraining)
        XCTAssertEqual(timers.nextDeadline, t0 + .milliseconds(500), "quiet period from the drain's start")

        timers.receiptRouted(now: t0 + .milliseconds(400))
        XCTAssertEqual(timers.nextDeadline, t0 + .milliseconds(900), "a receipt restarts the quiet period")
        XCTAssertFalse(timers.finishDrain(now: t0 + .milliseconds(899), connectionsLeft: 3))
        XCTAssertTrue(timers.finishDrain(now: t0 + .milliseconds(900), connectionsLeft: 3))
        XCTAssertFalse(timers.finishDrain(now: t0 + .seconds(6), connectionsLeft: 0), "said once")
        XCTAssertTrue(timers.isDraining, "a finished drain is still a drain")
    }

    func testADrainEndsAtItsDeadlineOrWhenNoConnectionIsLeft() {
        var timers = timers()
        timers.beginDrain(until: t0 + .seconds(1), now: t0)
        for step in 1...4 { timers.receiptRouted(now: t0 + .milliseconds(300 * Int64(step))) }
        XCTAssertFalse(timers.finishDrain(now: t0 + .milliseconds(999), connectionsLeft: 1))
        XCTAssertTrue(timers.finishDrain(now: t0 + .seconds(1), connectionsLeft: 1), "receipts keep coming: the deadline ends it")

        var empty = self.timers()
        empty.beginDrain(until: t0 + .seconds(5), now: t0)
        XCTAssertTrue(empty.finishDrain(now: t0, connectionsLeft: 0), "no client left: at once")
    }

    func testInboxReadsWaitUntilTakenOrDue() {
        var timers = timers()
        let bob = Recipient(user: "bob"), phone = Recipient(user: "carol", device: "phone")
        XCTAssertFalse(timers.awaitsInboxLoads)
        timers.loadInbox(of: bob, at: t0 + .milliseconds(200), connectedAt: t0)
        timers.loadInbox(of: phone, at: t0 + .milliseconds(100))
        XCTAssertTrue(timers.awaitsInboxLoads)
        XCTAssertEqual(timers.nextDeadline, t0 + .milliseconds(100))

        XCTAssertEqual(timers.takeInboxLoad(of: bob)?.connectedAt, t0, "bob's first datagram came: read now")
        XCTAssertNil(timers.takeInboxLoad(of: bob), "taken once")
        XCTAssertEqual(timers.dueInboxLoads(now: t0 + .milliseconds(99)), [])
        XCTAssertEqual(timers.dueInboxLoads(now: t0 + .milliseconds(100)), [phone])
        XCTAssertFalse(timers.awaitsInboxLoads)
        XCTAssertEqual(timers.nextDeadline, timers.nextHeartbeatCheck)
    }
}
