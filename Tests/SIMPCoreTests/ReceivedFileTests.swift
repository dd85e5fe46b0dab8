import NIOCore
import SIMPCore
import XCTest

/// A file received whole and announced again by its sender (docs/PROTOCOL.md §5.6): the
/// receiver's record of it recognises the announcement, and a receiver holding everything
/// answers `fileDone` at once, so the sender finishes without sending the file again.
final class ReceivedFileTests: XCTestCase {
    private let contents = (0..<5_500).map { UInt8(truncatingIfNeeded: $0 &* 31) }

    private func offer(id: UInt64, sender: String = "alice", contents: [UInt8]? = nil) -> FileReceiver.Offer {
        let bytes = contents ?? self.contents
        return FileReceiver.Offer(
            fileId: id, sender: sender, name: "plan.bin", size: UInt64(bytes.count), chunkSize: 1000,
            key: [UInt8](repeating: UInt8(truncatingIfNeeded: id), count: FileChunkCipher.keySize), digest: FileDigest.of(bytes))
    }

    func testTheSameFileFromTheSameSenderIsRecognisedUnderANewIdAndNoOneElsesIs() {
        let record = ReceivedFile(offer: offer(id: 1), path: "/downloads/plan.bin")
        XCTAssertTrue(record.isAnnounced(by: offer(id: 1)), "announced again under its id (its sender never heard done)")
        XCTAssertTrue(record.isAnnounced(by: offer(id: 2)), "sent again: a new id and key, the same content")
        XCTAssertFalse(record.isAnnounced(by: offer(id: 2, sender: "mallory")), "another sender learns nothing of what is held")
        XCTAssertFalse(record.isAnnounced(by: offer(id: 2, contents: contents.dropLast() + [0])), "other content")
        XCTAssertEqual(
            ReceivedFile.recordName(sender: "alice", digest: offer(id: 1).digest),
            ReceivedFile.recordName(sender: "alice", digest: offer(id: 2).digest))
        XCTAssertNotEqual(
            ReceivedFile.recordName(sender: "alice", digest: offer(id: 1).digest),
            ReceivedFile.recordName(sender: "mallory", digest: offer(id: 1).digest))
        XCTAssertEqual(ReceivedFile.recordName(sender: "alice", digest: offer(id: 1).digest).count, 32)
    }

    func testAReceiverHoldingEverythingAnswersDoneAndTheSenderStopsAtOnce() throws {
        let again = offer(id: 2)
        var receiver = FileReceiver.holdingEverything(offer: again, device: "phone", instance: 9)
        XCTAssertTrue(receiver.isComplete)
        let done = receiver.done(from: "bob")
        XCTAssertTrue(done.fileDone)
        XCTAssertEqual(done.fileId, 2)
        XCTAssertEqual(done.fileRanges, ChunkRanges([0..<6]).wireForm)

        // The sender's first window may already be on its way: each chunk is a duplicate, not written.
        let now = NIODeadline.uptimeNanoseconds(1_000_000_000)
        let cipher = FileChunkCipher(key: again.key, fileId: again.fileId)
        let chunk = SIMPMessage.fileChunk(
            cipher.seal(Array(contents[0..<1000]), index: 0), index: 0, number: 1, fileId: 2, from: "alice", to: "bob")
        XCTAssertEqual(receiver.chunkArrived(chunk, now: now), .duplicate)
        XCTAssertNotNil(receiver.pollAck(from: "bob", now: now), "a duplicate is acknowledged at once")

        var sender = FileSender(fileId: 2, chunkCount: again.chunkCount, now: now)
        let first = sender.poll(now: now)
        sender.acknowledgement(
            try XCTUnwrap(ChunkRanges(wireForm: done.fileRanges)), newestNumber: first.last?.number ?? 0, delay: .zero, device: "phone",
            instance: 9, done: true, now: now + .milliseconds(1))
        XCTAssertTrue(sender.isDone)
        XCTAssertEqual(sender.poll(now: now + .milliseconds(2)), [], "nothing more is sent")
        XCTAssertNil(sender.nextDeadline)
    }

    func testAnEmptyFileHeldIsComplete() {
        let empty = offer(id: 3, contents: [])
        XCTAssertTrue(FileReceiver.holdingEverything(offer: empty, device: "phone", instance: 1).isComplete)
    }
}
