import NIOCore
import SIMPLab
import XCTest

final class ImpairedLinkTests: XCTestCase {
    private func link(_ configure: (inout LinkConditions) -> Void, seed: UInt64 = 7) -> ImpairedLink<Int> {
        var conditions = LinkConditions()
        configure(&conditions)
        return ImpairedLink(conditions: conditions, random: SeededRandom(seed: seed))
    }

    private func sendMany(_ link: inout ImpairedLink<Int>, count: Int = 20_000) -> [ImpairedLink<Int>.Delivery] {
        (0..<count).flatMap { link.send($0, at: .milliseconds(Int64($0))) }
    }

    func testPerfectLinkDeliversEverythingOnceAfterTheDelay() {
        var perfect = link { $0.delayMs = 30 }
        let deliveries = sendMany(&perfect, count: 100)
        XCTAssertEqual(deliveries.map(\.packet), Array(0..<100))
        XCTAssertTrue(deliveries.allSatisfy { $0.after == .milliseconds(30) })
    }

    func testRandomLossRateMatchesThePercentage() {
        var lossy = link { $0.lossPercent = 10 }
        let delivered = sendMany(&lossy).count
        XCTAssertEqual(Double(20_000 - delivered) / 20_000, 0.10, accuracy: 0.01)
        XCTAssertEqual(lossy.statistics.lost, 20_000 - delivered)
    }

    func testJitterStaysWithinDelayPlusJitter() {
        var jittery = link {
            $0.delayMs = 30; $0.jitterMs = 31
        }
        let delays = sendMany(&jittery, count: 2_000).map(\.after)
        XCTAssertGreaterThanOrEqual(delays.min()!, .milliseconds(30))
        XCTAssertLessThanOrEqual(delays.max()!, .milliseconds(61))
        XCTAssertGreaterThan(delays.max()! - delays.min()!, .milliseconds(25), "jitter spreads the delays")
    }

    func testDuplicationDeliversSomePacketsTwice() {
        var duplicating = link { $0.duplicatePercent = 20 }
        let deliveries = sendMany(&duplicating)
        XCTAssertEqual(Double(deliveries.count - 20_000) / 20_000, 0.20, accuracy: 0.01)
        XCTAssertEqual(Set(deliveries.map(\.packet)).count, 20_000)
    }

    func testBurstLossComesInRuns() {
        var bursty = link { $0.burst = .init(enterBadPercent: 1, leaveBadPercent: 20, lossInBadPercent: 100) }
        let delivered = Set(sendMany(&bursty).map(\.packet))
        var runs: [Int] = []
        var run = 0
        for packet in 0..<20_000 {
            if delivered.contains(packet) { if run > 0 { runs.append(run) }; run = 0 } else { run += 1 }
        }
        let meanRun = Double(runs.reduce(0, +)) / Double(runs.count)
        XCTAssertEqual(meanRun, 5, accuracy: 1, "mean burst length is 1 / leave probability")
        XCTAssertEqual(Double(20_000 - delivered.count) / 20_000, 1.0 / 21, accuracy: 0.015)
    }

    func testBlackoutDropsEverythingInsideTheWindowOnly() {
        var darkened = link { $0.blackouts = [.init(atMs: 100, forMs: 50)] }
        let delivered = Set(sendMany(&darkened, count: 300).map(\.packet))
        XCTAssertEqual(delivered, Set(0..<300).subtracting(100..<150))
        XCTAssertEqual(darkened.statistics.lostInBlackout, 50)
        XCTAssertNil(darkened.segment(at: .milliseconds(120)))
        XCTAssertNotNil(darkened.segment(at: .milliseconds(150)))
    }

    func testReorderedPacketIsOvertakenByDepthLaterOnes() {
        var reordering = link { $0.reorder = .init(percent: 100, depth: 2) }
        // Every packet is held; a held packet leaves after two later ones entered.
        XCTAssertTrue(reordering.send(0, at: .zero).isEmpty)
        XCTAssertTrue(reordering.send(1, at: .zero).isEmpty)
        var conditions = LinkConditions()
        conditions.reorder = .init(percent: 10, depth: 3)
        var some = ImpairedLink<Int>(conditions: conditions, random: SeededRandom(seed: 3))
        let order = (0..<1_000).flatMap { some.send($0, at: .milliseconds(Int64($0))) }.map(\.packet)
        XCTAssertEqual(Set(order).count, order.count)
        XCTAssertNotEqual(order, order.sorted(), "some packets arrive late")
        for (position, packet) in order.enumerated() where position >= 4 {
            XCTAssertGreaterThanOrEqual(packet, order[position - 4] - 3 * 4, "overtaken by at most a few packets")
        }
    }

    func testReorderHoldExpires() {
        var reordering = link { $0.reorder = .init(percent: 100, depth: 5, maxHoldMs: 100) }
        _ = reordering.send(0, at: .zero)
        XCTAssertEqual(reordering.nextRelease, .milliseconds(100))
        XCTAssertTrue(reordering.releaseExpired(at: .milliseconds(99)).isEmpty)
        XCTAssertEqual(reordering.releaseExpired(at: .milliseconds(100)).map(\.packet), [0])
    }

    func testSameSeedSameDecisions() {
        func run(seed: UInt64) -> [Int] {
            var lossy = link(
                {
                    $0.lossPercent = 30; $0.duplicatePercent = 10; $0.jitterMs = 10
                }, seed: seed)
            return sendMany(&lossy, count: 500).map { $0.packet * 1_000_000 + Int($0.after.nanoseconds / 1000) }
        }
        XCTAssertEqual(run(seed: 1), run(seed: 1))
        XCTAssertNotEqual(run(seed: 1), run(seed: 2))
    }
}
