import NIOCore
import SIMPCore
import XCTest

/// The file transfer's sender and receiver together over lossy virtual links (docs/PROTOCOL.md §5.6).
final class FileTransferTests: XCTestCase {
    func testCleanLinkDeliversTheFileWithoutRetransmissions() {
        var transfer = VirtualTransfer(size: 300_000, forward: VirtualLink(), seed: 1)
        XCTAssertTrue(transfer.run())
        XCTAssertEqual(FileDigest.of(transfer.written), transfer.offer.digest)
        XCTAssertEqual(transfer.sender.retransmissions, 0)
        XCTAssertEqual(transfer.bytesSent, 300_000)
    }

    func testLossReorderingAndDuplicationStillDeliverTheFile() {
        for seed in 1...4 as ClosedRange<UInt64> {
            let lossy = VirtualLink(loss: 0.05, duplicate: 0.02, reorder: 0.05)
            var transfer = VirtualTransfer(size: 200_000, forward: lossy, backward: VirtualLink(loss: 0.05), seed: seed)
            XCTAssertTrue(transfer.run(), "seed \(seed)")
            XCTAssertEqual(transfer.written, transfer.file, "seed \(seed)")
            // Retransmissions repair the loss without resending much more than was lost.
            XCTAssertLessThan(Double(transfer.bytesSent), 1.25 * 200_000, "seed \(seed)")
        }
    }

    func testCongestionOnABottleneckIsAnsweredByTheWindow() {
        // 2,000 datagrams a second through a queue of 50: slow start overruns it, then the
        // window settles so that drops are rare.
        var transfer = VirtualTransfer(size: 1_100_000, forward: VirtualLink(rate: 2000, queueLimit: 50), seed: 3)
        let start = transfer.now
        XCTAssertTrue(transfer.run())
        XCTAssertEqual(transfer.written, transfer.file)
        XCTAssertGreaterThan(transfer.forward.queueDrops, 0, "slow start should fill the queue")
        XCTAssertLessThan(transfer.forward.queueDrops, 200)
        let seconds = Double((transfer.now - start).nanoseconds) / 1e9
        // 1,000 chunks at 2,000 a second take 0.5 s at best; the window keeps the link mostly busy.
        XCTAssertLessThan(seconds, 1.0)
        XCTAssertNotEqual(transfer.sender.congestion.state, .slowStart)
    }

    func testRestartedReceiverResumesFromWhatItSaved() {
        var transfer = VirtualTransfer(size: 550_000, forward: VirtualLink(), seed: 5)
        XCTAssertFalse(transfer.run { $0.receiver.received.count >= 250 })
        // Killed: it had saved the first 200 chunks only; what came after is gone.
        let saved = ChunkRanges([0..<200])
        transfer.written.replaceSubrange(200 * 1100..<transfer.written.count, with: [UInt8](repeating: 0, count: transfer.written.count - 200 * 1100))
        transfer.restartReceiver(keeping: saved, instance: 2)
        XCTAssertTrue(transfer.run())
        XCTAssertEqual(transfer.written, transfer.file)
        // Sent twice at most: what was lost with the receiver (50 chunks) plus one window.
        let window = UInt64(transfer.sender.congestion.maximumWindow)
        XCTAssertLessThanOrEqual(transfer.bytesSent, 550_000 + 1100 * (50 + min(window, 300)))
    }

    func testTheDoneAcknowledgementLostIsAskedForAgain() {
        var transfer = VirtualTransfer(size: 11_000, forward: VirtualLink(), backward: VirtualLink(loss: 0.5), seed: 9)
        XCTAssertTrue(transfer.run())
        XCTAssertTrue(transfer.sender.isDone)
    }

    func testAForgedOrMisplacedChunkIsRejected() {
        var random = SplitMix64(seed: 7)
        let key = FileChunkCipher.newKey(using: &random)
        let offer = FileReceiver.Offer(
            fileId: 5, sender: "alice", name: "x", size: 2500, chunkSize: 1000, key: key, digest: [UInt8](repeating: 0, count: 32))
        var receiver = FileReceiver(offer: offer, instance: 1)
        let cipher = FileChunkCipher(key: key, fileId: 5)
        let now = NIODeadline.uptimeNanoseconds(0)
        let first = cipher.seal([UInt8](repeating: 1, count: 1000), index: 0)
        // Sealed for chunk 0, presented as chunk 1: the nonce and associated data differ.
        XCTAssertEqual(
            receiver.chunkArrived(.fileChunk(first, index: 1, number: 1, fileId: 5, from: "alice", to: "bob"), now: now),
            .rejected("chunk 1 is not authentic"))
        XCTAssertEqual(
            receiver.chunkArrived(.fileChunk(first, index: 3, number: 2, fileId: 5, from: "alice", to: "bob"), now: now),
            .rejected("chunk 3 of a file of 3 chunks"))
        // The last chunk must be exactly the file's remainder (500 bytes).
        let long = cipher.seal([UInt8](repeating: 2, count: 1000), index: 2)
        XCTAssertEqual(
            receiver.chunkArrived(.fileChunk(long, index: 2, number: 3, fileId: 5, from: "alice", to: "bob"), now: now),
            .rejected("chunk 2 has 1000 bytes"))
        XCTAssertEqual(
            receiver.chunkArrived(.fileChunk(first, index: 0, number: 4, fileId: 5, from: "alice", to: "bob"), now: now),
            .write(offset: 0, plaintext: [UInt8](repeating: 1, count: 1000)))
        XCTAssertEqual(receiver.chunkArrived(.fileChunk(first, index: 0, number: 5, fileId: 5, from: "alice", to: "bob"), now: now), .duplicate)
        XCTAssertEqual(receiver.bytesHeld, 1000)
    }

    func testAcknowledgementsAreBatchedAndOutOfOrderArrivalsAnsweredAtOnce() {
        var random = SplitMix64(seed: 8)
        let key = FileChunkCipher.newKey(using: &random)
        let offer = FileReceiver.Offer(fileId: 5, sender: "alice", name: "x", size: 100_000, chunkSize: 1000, key: key, digest: [])
        var receiver = FileReceiver(offer: offer, device: "phone", instance: 77)
        let cipher = FileChunkCipher(key: key, fileId: 5)
        let start = NIODeadline.uptimeNanoseconds(0)
        XCTAssertEqual(receiver.pollAck(from: "bob", now: start)?.fileRanges, [], "the first acknowledgement says where to start")
        func arrive(_ index: UInt64, number: UInt64, at now: NIODeadline) {
            _ = receiver.chunkArrived(
                .fileChunk(
                    cipher.seal([UInt8](repeating: 0, count: 1000), index: index), index: index, number: number, fileId: 5, from: "alice", to: "bob"),
                now: now)
        }
        for index in 0..<7 as Range<UInt64> { arrive(index, number: index + 1, at: start) }
        XCTAssertNil(receiver.pollAck(from: "bob", now: start), "7 chunks in order: not yet")
        XCTAssertEqual(receiver.nextDeadline, start + .milliseconds(5))
        let late = receiver.pollAck(from: "bob", now: start + .milliseconds(5))
        XCTAssertEqual(late?.fileRanges, [0, 7])
        XCTAssertEqual(late?.holdMicros, 5000)
        XCTAssertEqual(late?.stream, 77)
        XCTAssertEqual(late?.device, "phone")
        arrive(9, number: 9, at: start + .milliseconds(6)) // chunks 7 and 8 are missing
        let gap = receiver.pollAck(from: "bob", now: start + .milliseconds(6))
        XCTAssertEqual(gap.flatMap { ChunkRanges(wireForm: $0.fileRanges) }, ChunkRanges([0..<7, 9..<10]))
        XCTAssertEqual(gap?.fileSeq, 9)
    }
}
