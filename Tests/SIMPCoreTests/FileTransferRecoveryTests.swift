import NIOCore
import SIMPCore
import XCTest

/// What a file transfer sends more than the file (docs/PROTOCOL.md §5.6): queues that fill, a
/// retransmission timeout, a relay that goes away, a sender started again. The bound is the
/// one the transfer promises: at most 10 % more than the file plus one window.
final class FileTransferRecoveryTests: XCTestCase {
    /// What the transfer may send: 1.10 × the file plus the largest window it reached.
    private func bound(_ transfer: VirtualTransfer) -> Double {
        1.10 * Double(transfer.file.count) + transfer.sender.congestion.largestWindow * Double(transfer.offer.chunkSize)
    }

    func testADeepQueueBeforeASlowReceiverIsNotFilledUntilItOverflows() {
        // A receiver that takes 2,000 chunks a second behind a queue of 16,384 (the client's
        // buffer of file datagrams): slow start ends on the rising round trip, and avoidance
        // backs off from a standing queue, so round trips never grow into timeouts.
        var transfer = VirtualTransfer(size: 2_200_000, forward: VirtualLink(delay: .microseconds(500), rate: 2000, queueLimit: 16_384), seed: 11)
        XCTAssertTrue(transfer.run())
        XCTAssertEqual(transfer.written, transfer.file)
        XCTAssertEqual(transfer.sender.timeouts, 0)
        XCTAssertLessThanOrEqual(Double(transfer.bytesSent), 1.02 * 2_200_000, "sent \(transfer.bytesSent)")
        XCTAssertLessThan(transfer.sender.congestion.largestWindow, 400, "the window stopped near what the path holds")
    }

    func testAShallowQueueBeforeASlowReceiverLosesLittle() {
        // The same receiver behind a socket buffer of 100 datagrams: the first overshoot is cut
        // short by the round trips rising, later ones by the standing queue.
        var transfer = VirtualTransfer(size: 2_200_000, forward: VirtualLink(delay: .microseconds(500), rate: 2000, queueLimit: 100), seed: 12)
        XCTAssertTrue(transfer.run())
        XCTAssertEqual(transfer.written, transfer.file)
        XCTAssertLessThanOrEqual(Double(transfer.bytesSent), 1.10 * 2_200_000, "sent \(transfer.bytesSent), \(transfer.forward.queueDrops) dropped")
    }

    func testATimeoutSendsOneProbeAndTheRestOnlyOnceALaterAcknowledgementSaysItIsLost() {
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var sender = FileSender(fileId: 1, chunkCount: 100, now: start)
        let first = sender.poll(now: start) + sender.poll(now: start + .milliseconds(30)) // paced
        XCTAssertEqual(first.map(\.chunk), Array(0..<10), "the first window")
        let deadline = try! XCTUnwrap(sender.nextDeadline)
        // Nothing acknowledged: one probe, the oldest chunk again, not the whole window.
        let probe = sender.poll(now: deadline)
        XCTAssertEqual(probe.map(\.chunk), [0])
        XCTAssertEqual(sender.timeouts, 1)
        XCTAssertEqual(sender.chunksInFlight, 11)
        // The probe's acknowledgement (only chunk 0 got through) makes the rest lost: sent again.
        let later = deadline + .milliseconds(5)
        sender.acknowledgement(ChunkRanges([0..<1]), newestNumber: probe[0].number, delay: .zero, device: "d", instance: 1, done: false, now: later)
        XCTAssertEqual(sender.lossesDetected, 9)
        let again = sender.poll(now: later).map(\.chunk)
        XCTAssertFalse(again.isEmpty)
        XCTAssertEqual(again, Array(1..<(1 + UInt64(again.count))), "the lost ones, in order")
    }

    func testARelayDownForSecondsCostsAProbePerTimeoutAndTheChunksItSwallowed() {
        // Both directions cut for 3 s (a relay killed and started again) while a window is in flight.
        let outage = NIODeadline.uptimeNanoseconds(1_300_000_000)..<NIODeadline.uptimeNanoseconds(4_300_000_000)
        var transfer = VirtualTransfer(
            size: 1_650_000, forward: VirtualLink(rate: 3000, queueLimit: 200, outage: outage), backward: VirtualLink(outage: outage), seed: 13)
        XCTAssertTrue(transfer.run())
        XCTAssertEqual(transfer.written, transfer.file)
        XCTAssertGreaterThan(transfer.sender.timeouts, 2)
        XCTAssertLessThanOrEqual(transfer.sender.timeouts, 8, "backed off: a probe per timeout")
        XCTAssertLessThanOrEqual(Double(transfer.bytesSent), bound(transfer), "sent \(transfer.bytesSent)")
    }

    func testASenderStartedAgainSendsOnlyWhatTheReceiverLacks() {
        var transfer = VirtualTransfer(size: 1_100_000, forward: VirtualLink(rate: 3000, queueLimit: 200), seed: 14)
        XCTAssertFalse(transfer.run { $0.receiver.received.count >= 500 })
        let sentBefore = transfer.bytesSent
        let lacking = 1000 - transfer.receiver.received.count
        transfer.restartSender()
        XCTAssertTrue(transfer.run())
        XCTAssertEqual(transfer.written, transfer.file)
        // What it lacked, plus what was still on the link from the first run, at most a window.
        let window = transfer.sender.congestion.largestWindow * 1100
        XCTAssertLessThanOrEqual(Double(transfer.bytesSent - sentBefore), Double(lacking * 1100) * 1.10 + window)
        XCTAssertLessThanOrEqual(Double(transfer.bytesSent), bound(transfer))
    }

    func testAResumedSenderWaitsForTheReceiverThenProbes() {
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var sender = FileSender(fileId: 1, chunkCount: 100, resuming: true, now: start)
        XCTAssertEqual(sender.poll(now: start), [], "nothing before the receiver says what it holds")
        let deadline = try! XCTUnwrap(sender.nextDeadline)
        XCTAssertEqual(sender.poll(now: deadline).map(\.chunk), [0], "no answer: one probe")
        // The receiver holds 0..<60 and saw numbers up to 700 from the earlier run.
        let later = deadline + .milliseconds(3)
        sender.acknowledgement(ChunkRanges([0..<60]), newestNumber: 700, delay: .zero, device: "d", instance: 1, done: false, now: later)
        let next = sender.poll(now: later)
        XCTAssertEqual(next.first?.chunk, 60, "starts at the first chunk it lacks")
        XCTAssertGreaterThan(next.first?.number ?? 0, 700, "numbered above the earlier run's")
        XCTAssertEqual(sender.lossesDetected, 0)
        XCTAssertEqual(sender.chunksHeldBefore, 60, "the earlier run's chunks, from the receiver's first answer")
        // This run's chunks acknowledged later are this run's work, not the earlier run's.
        sender.acknowledgement(
            ChunkRanges([0..<60, 60..<(60 + UInt64(next.count))]), newestNumber: next.last?.number ?? 0, delay: .zero, device: "d",
            instance: 1, done: false, now: later + .milliseconds(5))
        XCTAssertEqual(sender.chunksHeldBefore, 60)
        XCTAssertEqual(FileSender(fileId: 2, chunkCount: 10, now: start).chunksHeldBefore, 0)
    }

    func testAChunkSentAgainForNothingWidensHowLateAChunkMayArriveBeforeItIsLost() {
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var sender = FileSender(fileId: 1, chunkCount: 100, now: start)
        let first = sender.poll(now: start) + sender.poll(now: start + .milliseconds(30))
        XCTAssertEqual(first.count, 10)
        // Chunk 1 (paced out at 30 ms) overtakes chunk 0 (sent at 0): a 10 ms round trip, and
        // chunk 0, 40 ms old, is declared lost.
        var now = start + .milliseconds(40)
        sender.acknowledgement(ChunkRanges([1..<2]), newestNumber: first[1].number, delay: .zero, device: "d", instance: 1, done: false, now: now)
        now = now + .milliseconds(60)
        let resent = sender.poll(now: now).filter { $0.chunk == 0 }
        XCTAssertEqual(resent.count, 1, "declared lost and sent again")
        XCTAssertEqual(sender.spuriousRetransmissions, 0)
        XCTAssertEqual(sender.reorderingAllowance, .zero)
        // The first copy arrives after all: the acknowledgement holding chunk 0 echoes a number
        // below the copy sent again.
        sender.acknowledgement(
            ChunkRanges([0..<10]), newestNumber: first[9].number, delay: .zero, device: "d", instance: 1, done: false, now: now + .milliseconds(1))
        XCTAssertEqual(sender.spuriousRetransmissions, 1)
        XCTAssertEqual(sender.reorderingAllowance, .milliseconds(5), "grown, up to its bound: half the 10 ms round trip")
    }

    func testACopySentAgainThatIsTheOneReceivedIsNotSpurious() {
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var sender = FileSender(fileId: 1, chunkCount: 100, now: start)
        let first = sender.poll(now: start) + sender.poll(now: start + .milliseconds(30))
        var now = start + .milliseconds(40)
        sender.acknowledgement(ChunkRanges([1..<2]), newestNumber: first[1].number, delay: .zero, device: "d", instance: 1, done: false, now: now)
        now = now + .milliseconds(60)
        let resent = try! XCTUnwrap(sender.poll(now: now).first { $0.chunk == 0 })
        sender.acknowledgement(
            ChunkRanges([0..<2]), newestNumber: resent.number, delay: .zero, device: "d", instance: 1, done: false, now: now + .milliseconds(40))
        XCTAssertEqual(sender.spuriousRetransmissions, 0)
        XCTAssertEqual(sender.reorderingAllowance, .zero)
    }
}
