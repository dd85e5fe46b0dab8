import NIOCore
import SIMPCore
import XCTest

/// The file transfer's congestion controller, its state machine in virtual time. CUBIC's own
/// mechanics are shown with TCP's loss rule (`.everyLoss`); the file transfer's own rules
/// (`.congestionOnly`: random loss tolerated, a standing queue reacted to) at the end.
final class CubicWindowTests: XCTestCase {
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
    let rtt = TimeAmount.milliseconds(100)

    func testSlowStartDoublesTheWindowEachRoundTrip() {
        var window = CubicWindow(initialWindow: 10, lossResponse: .everyLoss)
        var sent: UInt64 = 0
        for round in 0..<3 {
            let count = window.chunks
            sent += UInt64(count)
            window.acknowledged(count: count, newest: sent, rtt: rtt, now: start + rtt * Int64(round + 1))
        }
        XCTAssertEqual(window.window, 80)
        XCTAssertEqual(window.state, .slowStart)
    }

    func testALossShrinksTheWindowOnceAndRecoveryEndsWithANewerAcknowledgement() {
        var window = CubicWindow(initialWindow: 100, lossResponse: .everyLoss)
        window.lost(number: 50, newestSent: 120, now: start)
        XCTAssertEqual(window.window, 70, accuracy: 1e-9)
        XCTAssertEqual(window.wMax, 100)
        XCTAssertEqual(window.state, .recovery(until: 120))
        // More losses from the same flight are the same event.
        window.lost(number: 51, newestSent: 125, now: start)
        window.lost(number: 120, newestSent: 125, now: start)
        XCTAssertEqual(window.window, 70, accuracy: 1e-9)
        // Acknowledgements of chunks sent before the reduction do not grow it.
        window.acknowledged(count: 30, newest: 110, rtt: rtt, now: start + rtt)
        XCTAssertEqual(window.window, 70, accuracy: 1e-9)
        XCTAssertEqual(window.state, .recovery(until: 120))
        // One sent after it ends recovery.
        window.acknowledged(count: 1, newest: 121, rtt: rtt, now: start + rtt)
        XCTAssertEqual(window.state, .congestionAvoidance)
        // A loss of a chunk sent after the reduction is a new event.
        window.lost(number: 126, newestSent: 200, now: start + rtt * 2)
        XCTAssertLessThan(window.window, 70 * 0.71)
        XCTAssertEqual(window.wMax, 70 * 1.7 / 2, accuracy: 1, "fast convergence: below the last wMax, remember less")
    }

    func testAvoidanceClimbsBackToTheOldWindowInKSecondsThenProbesBeyond() {
        var window = CubicWindow(initialWindow: 1000, lossResponse: .everyLoss)
        window.lost(number: 1, newestSent: 1, now: start)
        var number: UInt64 = 2
        // K = cbrt(1000 · 0.3 / 0.4) ≈ 9.1 s: feed a window of acknowledgements every round trip.
        var now = start
        var at5s = 0.0
        while now < start + .seconds(12) {
            now = now + rtt
            let count = window.chunks
            number += UInt64(count)
            window.acknowledged(count: count, newest: number, rtt: rtt, now: now)
            if at5s == 0, now >= start + .seconds(5) { at5s = window.window }
        }
        XCTAssertGreaterThan(at5s, 800, "concave: most of the way back after half of K")
        XCTAssertLessThan(at5s, 1000)
        XCTAssertGreaterThan(window.window, 1000, "convex: beyond the old window after K")
        XCTAssertLessThan(window.window, 1300)
    }

    func testPersistentCongestionRestartsSlowStartFromTheMinimum() {
        var window = CubicWindow(initialWindow: 64)
        window.persistentCongestion(newestSent: 500)
        XCTAssertEqual(window.window, 2)
        XCTAssertEqual(window.state, .slowStart)
        XCTAssertEqual(window.slowStartThreshold, 64 * 0.7, accuracy: 1e-9)
        window.lost(number: 400, newestSent: 510, now: start) // sent before the timeout: already counted
        XCTAssertEqual(window.window, 2)
        window.acknowledged(count: 100, newest: 520, rtt: rtt, now: start + rtt)
        XCTAssertEqual(window.state, .congestionAvoidance, "slow start ends at the threshold")
    }

    func testPacingSpreadsTheWindowOverTheRoundTrip() {
        let window = CubicWindow(initialWindow: 10)
        XCTAssertEqual(window.pacingInterval(rtt: .milliseconds(100)), .milliseconds(5))
    }

    func testRisingRoundTripsEndSlowStartBeforeALoss() {
        var window = CubicWindow(initialWindow: 32, lossResponse: .everyLoss)
        var number: UInt64 = 0
        var now = start
        // Round 1: 8 round trips of 10 ms; round 2: 8 of 15 ms (a queue builds: +5 ms > 10/8 and 4 ms).
        for (round, sample) in [(0, 10), (1, 15)] as [(Int, Int64)] {
            let end = number + 32
            for _ in 0..<8 {
                number += 4
                now = now + .milliseconds(1)
                window.roundTripMeasured(.milliseconds(sample), newest: number, newestSent: end + UInt64(round) * 32, now: now)
            }
            number = end
            XCTAssertEqual(window.state, round == 0 ? .slowStart : .congestionAvoidance, "round \(round)")
        }
        XCTAssertEqual(window.slowStartThreshold, window.window)
        XCTAssertEqual(window.minimumRTT, .milliseconds(10))
    }

    func testSteadyRoundTripsKeepSlowStart() {
        var window = CubicWindow(initialWindow: 32)
        for number in 1...64 as ClosedRange<UInt64> {
            window.roundTripMeasured(.milliseconds(10 + Int64(number % 3)), newest: number, newestSent: (number / 16 + 1) * 16, now: start)
        }
        XCTAssertEqual(window.state, .slowStart)
    }

    func testAStandingQueueInAvoidanceShrinksTheWindowOncePerRound() {
        var window = CubicWindow(initialWindow: 100, lossResponse: .everyLoss)
        window.lost(number: 1, newestSent: 1, now: start)
        window.acknowledged(count: 1, newest: 2, rtt: rtt, now: start) // recovery over
        XCTAssertEqual(window.state, .congestionAvoidance)
        let before = window.window
        window.roundTripMeasured(.milliseconds(10), newest: 2, newestSent: 10, now: start)
        // The next round: every round trip above 2 × 10 ms + 5 ms.
        for number in 11...30 as ClosedRange<UInt64> {
            window.roundTripMeasured(.milliseconds(40), newest: number, newestSent: 60, now: start + .milliseconds(50))
        }
        XCTAssertEqual(window.window, before * CubicWindow.delayBeta, accuracy: 1e-9, "once in the round")
        XCTAssertEqual(window.delayReductions, 1)
        // Round trips near the path's own: no reduction.
        for number in 61...90 as ClosedRange<UInt64> {
            window.roundTripMeasured(.milliseconds(14), newest: number, newestSent: 120, now: start + .milliseconds(100))
        }
        XCTAssertEqual(window.delayReductions, 1)
    }

    /// Feeds `count` round trips of `sample` (one per transmission number from `first`).
    private func measure(_ window: inout CubicWindow, _ sample: TimeAmount, count: Int, from first: UInt64, at now: NIODeadline) -> UInt64 {
        var number = first
        for _ in 0..<count {
            number += 1
            window.roundTripMeasured(sample, newest: number, newestSent: number + 8, now: now)
        }
        return number
    }

    func testRandomLossWithoutAQueueLeavesTheWindowAndSlowStart() {
        var window = CubicWindow(initialWindow: 100)
        let number = measure(&window, .milliseconds(60), count: 40, from: 0, at: start)
        window.acknowledged(count: 100, newest: number, rtt: .milliseconds(60), now: start)
        let before = window.window
        window.lost(number: number - 5, newestSent: number + 8, now: start)
        XCTAssertEqual(window.window, before, "not shrunk")
        XCTAssertEqual(window.state, .slowStart)
        XCTAssertEqual(window.lossesTolerated, 1)
        // TCP's rule shrinks it for the same loss.
        var tcp = CubicWindow(initialWindow: 100, lossResponse: .everyLoss)
        _ = measure(&tcp, .milliseconds(60), count: 40, from: 0, at: start)
        tcp.lost(number: number - 5, newestSent: number + 8, now: start)
        XCTAssertEqual(tcp.window, 70, accuracy: 1e-9)
    }

    func testALossWithAStandingQueueShrinksTheWindow() {
        var window = CubicWindow(initialWindow: 100)
        var number = measure(&window, .milliseconds(60), count: 40, from: 0, at: start)
        // 32 round trips 20 ms above the path's 60 (more than a quarter): a queue stands, and slow start ends.
        number = measure(&window, .milliseconds(80), count: 32, from: number, at: start + .milliseconds(100))
        XCTAssertEqual(window.state, .congestionAvoidance)
        let before = window.window
        window.lost(number: number, newestSent: number + 8, now: start + .milliseconds(200))
        XCTAssertEqual(window.window, before * CubicWindow.beta, accuracy: 1e-9)
        XCTAssertEqual(window.lossesTolerated, 0)
    }

    func testJitterAlonePassesForNoQueue() {
        // Round trips spread over 60-120 ms (KCP's test link): the smallest of any 32 stays near 60.
        var window = CubicWindow(initialWindow: 100)
        var random = SplitMix64(seed: 3)
        for number in 1...400 as ClosedRange<UInt64> {
            let sample = TimeAmount.milliseconds(60 + Int64.random(in: 0...31, using: &random) + Int64.random(in: 0...31, using: &random))
            window.roundTripMeasured(sample, newest: number, newestSent: number + 8, now: start)
        }
        XCTAssertEqual(window.state, .slowStart, "no queue: slow start goes on")
        window.lost(number: 390, newestSent: 408, now: start)
        XCTAssertEqual(window.window, 100)
    }

    func testAHeavyShareOfARoundLostIsCongestionEvenWithoutAQueue() {
        var window = CubicWindow(initialWindow: 40)
        let number = measure(&window, .milliseconds(60), count: 40, from: 0, at: start)
        window.acknowledged(count: 20, newest: number, rtt: .milliseconds(60), now: start)
        for lost in 0..<8 as Range<UInt64> { window.lost(number: number - lost, newestSent: number + 8, now: start) }
        XCTAssertLessThan(window.window, 60, "8 of 28 lost: shrunk")
    }

    // MARK: Slow start that does not overfill the bottleneck

    func testTheFileTransfersSlowStartGrowsByHalfEachRoundTrip() {
        var window = CubicWindow(initialWindow: 16)
        var sent: UInt64 = 0
        for round in 0..<2 {
            let count = window.chunks
            sent += UInt64(count)
            window.acknowledged(count: count, newest: sent, rtt: rtt, now: start + rtt * Int64(round + 1))
        }
        XCTAssertEqual(window.window, 36, accuracy: 1e-9, "16 → 24 → 36")
        XCTAssertEqual(window.state, .slowStart)
    }

    /// Slow start through a 2,000 chunk/s bottleneck on a 40 ms path (0-4 ms of jitter), fed
    /// every 5 ms: a window's worth acknowledged per round trip up to the bottleneck's 10 per
    /// 5 ms; the window beyond the 80 the path holds waits in the queue (2 chunks a ms).
    private func slowStartIntoAQueue(_ window: inout CubicWindow) -> (queueAtExit: Double, number: UInt64) {
        var number: UInt64 = 0
        var now = start
        for step in 0..<400 {
            now = now + .milliseconds(5)
            let count = min(10, max(1, window.chunks / 8))
            number += UInt64(count)
            window.acknowledged(count: count, newest: number, rtt: .milliseconds(40), now: now)
            let queue = max(0, window.window - 80) / 2
            let sample = TimeAmount.milliseconds(40 + Int64(step % 5) + Int64(queue))
            window.roundTripMeasured(sample, newest: number, newestSent: number + UInt64(window.chunks), now: now)
            if window.state != .slowStart { return (queue, number) }
        }
        return (-1, number)
    }

    func testAQueueOfAFewMillisecondsEndsSlowStartAndTheWindowFallsToWhatThePathDelivers() {
        var window = CubicWindow(initialWindow: 16)
        let (queueAtExit, number) = slowStartIntoAQueue(&window)
        XCTAssertEqual(window.state, .congestionAvoidance)
        // The margin: 5 ms (40/8) plus twice the jitter (~2 ms), over the last 8 samples.
        XCTAssertGreaterThan(queueAtExit, 5, "jitter alone did not end it")
        // A queue above the margin in each of 8 samples (40 ms of growth by half a ms per ms).
        XCTAssertLessThan(queueAtExit, 30, "a queue of less than the round trip did")
        // What the path delivered over its round trip without a queue (40 ms and the jitter's
        // share, at 2 chunks a ms, counted in 5 ms steps).
        XCTAssertEqual(window.window, 90, accuracy: 10)
        XCTAssertEqual(window.slowStartThreshold, window.window)
        XCTAssertEqual(window.wMax, window.window, "avoidance probes on from the drained window")
        // The flight sent before leaving shows the queue and loses chunks to it: one event.
        let after = window.window
        window.roundTripMeasured(.milliseconds(70), newest: number, newestSent: number + 100, now: start + .seconds(3))
        window.lost(number: number - 10, newestSent: number + 100, now: start + .seconds(3))
        XCTAssertEqual(window.window, after)
        XCTAssertEqual(window.delayReductions, 0)
    }

    /// Leaving slow start on a queue that has only just formed: over the round trip counted, the
    /// path delivered a chunk a ms while the window kept growing (the queue showed late), so the
    /// count alone (~42) is far below the window; the window keeps `beta` of itself, as after a loss.
    func testLeavingSlowStartTakesOffNoMoreThanALossWouldWhenTheDeliveryCountLagsTheWindow() {
        var window = CubicWindow(initialWindow: 100)
        var number: UInt64 = 0
        var now = start
        var before = window.window
        // 60 ms of a steady 40 ms path, then round trips 20 ms above it (a queue): one ack a ms.
        for step in 0..<100 where window.state == .slowStart {
            before = window.window
            now = now + .milliseconds(1)
            number += 1
            window.roundTripMeasured(.milliseconds(step < 60 ? 40 : 60), newest: number, newestSent: number + 100, now: now)
            window.acknowledged(count: 1, newest: number, rtt: .milliseconds(40), now: now)
        }
        XCTAssertEqual(window.state, .congestionAvoidance, "the queue ended slow start")
        XCTAssertGreaterThan(number, 60 + 7, "after 8 round trips above the margin")
        XCTAssertEqual(window.wMax, before * CubicWindow.beta, accuracy: 1e-9, "not the ~42 delivered in 42 ms")
        XCTAssertEqual(window.slowStartThreshold, window.wMax)
        XCTAssertGreaterThan(window.wMax, 90)
        XCTAssertEqual(window.window, window.wMax, accuracy: 0.1, "avoidance goes on from there (its first ack)")
    }

    func testTCPsSlowStartKeepsDoublingWhereTheFileTransfersLeavesIt() {
        var tcp = CubicWindow(initialWindow: 200, lossResponse: .everyLoss, reducesOnDelay: false)
        var window = CubicWindow(initialWindow: 200)
        let tcpQueue = slowStartIntoAQueue(&tcp).queueAtExit
        let queue = slowStartIntoAQueue(&window).queueAtExit
        XCTAssertTrue(tcpQueue == -1 || tcpQueue > 2 * queue, "HyStart's round-to-round rule is TCP's: \(tcpQueue) ms against \(queue)")
    }

    func testJitterIsTheMeanDifferenceBetweenConsecutiveRoundTrips() {
        var window = CubicWindow(initialWindow: 100)
        for number in 1...200 as ClosedRange<UInt64> {
            window.roundTripMeasured(.milliseconds(number % 2 == 0 ? 60 : 70), newest: number, newestSent: number + 8, now: start)
        }
        XCTAssertEqual(Double(window.jitter.nanoseconds) / 1e6, 10, accuracy: 0.1)
        XCTAssertEqual(window.state, .slowStart, "a spread of 10 ms is jitter, not a queue")
    }
}
