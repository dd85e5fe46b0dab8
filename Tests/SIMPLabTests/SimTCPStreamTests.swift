import NIOCore
import XCTest

@testable import SIMPLab

/// The simulator's TCP model with thousands of segments outstanding, as when a client carries
/// its datagrams over the control connection through a blackout (`fast-sender-blackout`).
final class SimTCPStreamTests: XCTestCase {
    private let segments = 3_000

    /// A stream over a link with 2 % loss that is down for its first 10 s, sending a segment
    /// every 2 ms from the start: everything queues up, then comes out after the blackout.
    private func streamThroughABlackout(delivered: @escaping (Int) -> Void) -> (SimTCPStream, EventQueue) {
        let queue = EventQueue()
        var conditions = LinkConditions()
        conditions.lossPercent = 2
        conditions.delayMs = 20
        conditions.jitterMs = 5
        conditions.blackouts = [LinkConditions.Blackout(atMs: 0, forMs: 10_000)]
        func link(_ stream: UInt64) -> SimLink {
            SimLink(conditions: conditions, random: SeededRandom(seed: 7, stream: stream), queue: queue, workloadStart: { .zero })
        }
        let stream = SimTCPStream(forward: link(1), reverse: link(2), queue: queue) { bytes in
            delivered(bytes.getInteger(at: bytes.readerIndex, as: Int.self)!)
        }
        for index in 0..<segments {
            queue.schedule(at: .milliseconds(2 * Int64(index))) {
                var bytes = ByteBuffer()
                bytes.writeInteger(index)
                stream.send(bytes)
            }
        }
        return (stream, queue)
    }

    func testEverySegmentArrivesOnceAndInOrderAfterTheBlackout() {
        var arrived: [Int] = []
        let (stream, queue) = streamThroughABlackout { arrived.append($0) }
        _ = queue.run(until: .seconds(600), checkEvery: 1_000)
        XCTAssertEqual(arrived, Array(0..<segments))
        XCTAssertGreaterThan(stream.retransmissions, segments, "the blackout made the stream resend everything")
    }

    /// The SACK and loss bookkeeping visits each entry a bounded number of times: it used to
    /// sort every SACK set, and walk it and every outstanding segment at each ACK, which made a
    /// blackout's backlog quadratic (`fast-sender-blackout` ran 6× longer than the rest of the
    /// suite together).
    func testBookkeepingGrowsWithTheTrafficNotWithItsSquare() {
        var arrived = 0
        let (stream, queue) = streamThroughABlackout { _ in arrived += 1 }
        _ = queue.run(until: .seconds(600), checkEvery: 1_000)
        XCTAssertEqual(arrived, segments)
        let transmissions = segments + stream.retransmissions
        XCTAssertLessThanOrEqual(stream.bookkeepingSteps, 4 * transmissions, "\(transmissions) transmissions")
    }
}
