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

    /// Traffic is liveness: a peer heard within the interval is not pinged, and the next ping
    /// is due an interval after it was last heard (it used to be pinged every interval
    /// whatever it sent, a round trip per connection per interval).
    func testAPeerHeardWithinTheIntervalIsNotPinged() {
        var beat = Heartbeat(policy: policy, now: t0)
        beat.heard(at: t0 + .seconds(3))
        XCTAssertEqual(beat.nextDeadline, t0 + .seconds(8), "an interval after it was last heard")
        XCTAssertEqual(beat.poll(now: t0 + .seconds(5)), .none, "heard 2 s ago")
        XCTAssertEqual(beat.poll(now: t0 + .seconds(8)), .sendPing, "silent for an interval")
        beat.heard(at: t0 + .seconds(8))
        XCTAssertEqual(beat.poll(now: t0 + .seconds(12)), .none)
        XCTAssertEqual(beat.nextDeadline, t0 + .seconds(13))
    }

    /// The defaults: a relay pings a client silent for 2 min and gives it up after 4 min; the
    /// reference client pings first (after 110 s of silence), so a healthy idle session costs
    /// the relay one PING read and one PONG written per 110 s, and no PING of its own.
    func testTheClientsDefaultIntervalEndsBeforeTheRelays() {
        XCTAssertEqual(HeartbeatPolicy.relay.deadAfter, .seconds(240))
        XCTAssertLessThan(HeartbeatPolicy.client.interval, HeartbeatPolicy.relay.interval)
        var relaySide = Heartbeat(policy: .relay, now: t0), clientSide = Heartbeat(policy: .client, now: t0)
        var relayPings = 0, clientPings = 0
        var now = t0
        while now < t0 + .seconds(660) {
            now = min(relaySide.nextDeadline, clientSide.nextDeadline)
            if clientSide.poll(now: now) == .sendPing { clientPings += 1; relaySide.heard(at: now); clientSide.heard(at: now) } // PING, then PONG
            if relaySide.poll(now: now) == .sendPing { relayPings += 1; clientSide.heard(at: now); relaySide.heard(at: now) }
        }
        XCTAssertEqual(relayPings, 0)
        XCTAssertEqual(clientPings, 6, "one per 110 s over 11 minutes")
    }

    /// A peer that content just went to and that was silent for `suspectAfter` is pinged at
    /// once (one suspicion at a time) and dead `answerWithin` after it unless heard; anything
    /// heard clears the suspicion.
    func testASuspectedPeerIsPingedAtOnceAndDeadUnlessItAnswersInTime() {
        let policy = HeartbeatPolicy(interval: .seconds(60), missLimit: 2, suspectAfter: .seconds(5), answerWithin: .seconds(10))
        var beat = Heartbeat(policy: policy, now: t0)
        XCTAssertFalse(beat.suspect(now: t0 + .seconds(4)), "heard 4 s ago")
        XCTAssertTrue(beat.suspect(now: t0 + .seconds(5)))
        XCTAssertFalse(beat.suspect(now: t0 + .seconds(6)), "already suspected: one PING")
        XCTAssertEqual(beat.nextDeadline, t0 + .seconds(15))
        XCTAssertEqual(beat.poll(now: t0 + .seconds(14)), .none)
        XCTAssertEqual(beat.poll(now: t0 + .seconds(15)), .peerDead, "silent 10 s after the suspicion PING")

        var answered = Heartbeat(policy: policy, now: t0)
        XCTAssertTrue(answered.suspect(now: t0 + .seconds(5)))
        answered.heard(at: t0 + .seconds(6))
        XCTAssertEqual(answered.poll(now: t0 + .seconds(15)), .none)
        XCTAssertEqual(answered.nextDeadline, t0 + .seconds(66), "back to the interval")
        var unsuspecting = Heartbeat(policy: self.policy, now: t0)
        XCTAssertFalse(unsuspecting.suspect(now: t0 + .minutes(1)), "no suspectAfter: never suspected")
    }

    /// With a slot, deadlines are rounded up to its multiples, so connections due within one
    /// slot share one wake-up of the relay (it used to wake once per connection's deadline).
    func testDeadlinesAreRoundedUpToTheSlotAndShareOneCheck() {
        let slotted = HeartbeatPolicy(interval: .seconds(5), missLimit: 3, slot: .milliseconds(500))
        XCTAssertEqual(Heartbeat(policy: slotted, now: t0 + .milliseconds(100)).nextDeadline, t0 + .milliseconds(5500))
        XCTAssertEqual(Heartbeat(policy: slotted, now: t0).nextDeadline, t0 + .seconds(5), "on a slot's edge already")

        var table = ConnectionTable(connectionLimit: RateLimit(perSecond: 100, burst: 100), maxConnectionsPerHost: 10, heartbeat: slotted)
        XCTAssertNil(table.open(ConnectionID(1), host: "10.0.0.1", now: t0 + .milliseconds(100)).refuse)
        XCTAssertNil(table.open(ConnectionID(2), host: "10.0.0.1", now: t0 + .milliseconds(300)).refuse)
        XCTAssertEqual(table.nextHeartbeatDeadline, t0 + .milliseconds(5500), "one wake-up for both")
        XCTAssertEqual(table.pollHeartbeats(now: t0 + .milliseconds(5500)).ping, [ConnectionID(1), ConnectionID(2)])
    }

    /// A suspicion moves a connection's deadline earlier; the entry it had is skipped when it
    /// comes up, so each connection stays checked once per deadline.
    func testASuspicionMovesTheConnectionsDeadlineEarlierWithoutDuplicateChecks() {
        let policy = HeartbeatPolicy(interval: .seconds(60), missLimit: 2, suspectAfter: .seconds(5), answerWithin: .seconds(10))
        var table = ConnectionTable(connectionLimit: RateLimit(perSecond: 100, burst: 100), maxConnectionsPerHost: 10, heartbeat: policy)
        let quiet = ConnectionID(1), answering = ConnectionID(2)
        XCTAssertNil(table.open(quiet, host: "10.0.0.1", now: t0).refuse)
        XCTAssertNil(table.open(answering, host: "10.0.0.1", now: t0).refuse)
        XCTAssertTrue(table.suspect(quiet, now: t0 + .seconds(6)))
        XCTAssertTrue(table.suspect(answering, now: t0 + .seconds(6)))
        XCTAssertFalse(table.suspect(quiet, now: t0 + .seconds(7)))
        table.heard(answering, now: t0 + .seconds(7))
        XCTAssertEqual(table.nextHeartbeatDeadline, t0 + .seconds(16))
        let due = table.pollHeartbeats(now: t0 + .seconds(16))
        XCTAssertEqual(due.dead, [quiet])
        XCTAssertEqual(due.ping, [])
        XCTAssertEqual(table.pollHeartbeats(now: t0 + .seconds(60)).ping, [], "answering was heard at 7 s: its stale entry at 60 s is skipped")
        XCTAssertEqual(table.pollHeartbeats(now: t0 + .seconds(67)).ping, [answering], "pinged once, an interval after it was heard")
    }

    func testAnythingHeardKeepsThePeerAlive() {
        var beat = Heartbeat(policy: policy, now: t0)
        beat.heard(at: t0 + .seconds(14))
        XCTAssertNotEqual(beat.poll(now: t0 + .seconds(15)), .peerDead)
        XCTAssertEqual(beat.poll(now: t0 + .seconds(29)), .peerDead)
    }

    func testConnectionTableReportsPingsAndDeaths() {
        var table = ConnectionTable(connectionLimit: RateLimit(perSecond: 100, burst: 100), maxConnectionsPerHost: 10, heartbeat: policy)
        let quiet = ConnectionID(1), chatty = ConnectionID(2)
        XCTAssertNil(table.open(quiet, host: "10.0.0.1", now: t0).refuse)
        XCTAssertNil(table.open(chatty, host: "10.0.0.1", now: t0).refuse)

        table.heard(chatty, now: t0 + .seconds(4))
        let first = table.pollHeartbeats(now: t0 + .seconds(5))
        XCTAssertEqual(first.ping, [quiet], "chatty spoke a second ago")
        XCTAssertEqual(table.pollHeartbeats(now: t0 + .seconds(9)).ping, [chatty], "silent for an interval")
        table.heard(chatty, now: t0 + .seconds(12))
        let later = table.pollHeartbeats(now: t0 + .seconds(15))

        XCTAssertEqual(later.dead, [quiet])
        XCTAssertEqual(table.close(quiet), .awaitingLogin)
        XCTAssertEqual(table.count, 1)
        XCTAssertNil(table.close(quiet), "closed once")
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
        XCTAssertEqual(sender.nextDeadline, t0 + policy.delayNoticeAfter, "no retransmission timer, only the delay notice")
        let down = sender.poll(now: t0 + .seconds(60))
        XCTAssertEqual(down.transmit, [], "nothing sent while the path is down")
        XCTAssertEqual(down.events, [], "no give-up before the time limit, whatever the count")
        XCTAssertEqual(down.delayed.map(\.messageId), [1, 2], "both are reported delayed")

        let resumed = sender.resume(now: t0 + .seconds(60))

        XCTAssertEqual(resumed.transmit.map(\.content), ["a", "b"])
        XCTAssertEqual(resumed.transmit.map(\.attempt), [2, 1])
        XCTAssertNotNil(sender.nextDeadline)
    }
}
