import SIMPCore
import XCTest

/// Chunk ranges, their wire form, and the chunk seal.
final class ChunkRangesTests: XCTestCase {
    func testInsertMergesTouchingAndOverlappingRanges() {
        var set = ChunkRanges()
        for index: UInt64 in [5, 3, 4, 10, 0] { set.insert(index) }
        XCTAssertEqual(set.ranges, [0..<1, 3..<6, 10..<11])
        set.insert(1..<3)
        XCTAssertEqual(set.ranges, [0..<6, 10..<11])
        set.insert(2..<12)
        XCTAssertEqual(set.ranges, [0..<12])
        XCTAssertTrue(set.covers(12))
        XCTAssertFalse(set.covers(13))
        XCTAssertEqual(set.firstMissing, 12)
        XCTAssertFalse(set.insert(7))
    }

    /// Ranges in order (extended in place), beyond the last (appended) and anywhere else: always
    /// the set of indices inserted, as sorted ranges that neither touch nor overlap.
    func testInsertAgreesWithASetOfTheIndices() {
        var random = SplitMix64(seed: 3)
        var set = ChunkRanges()
        var model = Set<UInt64>()
        for step in 0..<3000 {
            let low = step < 1000 ? UInt64(step / 2 * 3) : UInt64.random(in: 0..<4000, using: &random)
            let range = low..<(low + UInt64.random(in: 1...5, using: &random))
            set.insert(range)
            model.formUnion(range)
            XCTAssertEqual(set.count, UInt64(model.count), "step \(step)")
            for (earlier, later) in zip(set.ranges, set.ranges.dropFirst()) {
                XCTAssertLessThan(earlier.upperBound, later.lowerBound, "step \(step): \(set)")
            }
        }
        XCTAssertEqual(Set(set.ranges.flatMap { Array($0) }), model)
    }

    func testMissingReportedAndPopFirst() {
        var set = ChunkRanges([0..<3, 5..<6, 8..<9, 11..<12])
        XCTAssertEqual(set.missing(below: 10), [3..<5, 6..<8, 9..<10])
        XCTAssertEqual(set.reported(limit: 3), [0..<3, 8..<9, 11..<12])
        XCTAssertEqual(set.popFirst(), 0)
        XCTAssertEqual(set.ranges.first, 1..<3)
    }

    func testWireFormRoundTripsAndRefusesMalformedLists() {
        let set = ChunkRanges([0..<3, 5..<6, 100..<200])
        XCTAssertEqual(set.wireForm, [0, 3, 2, 1, 94, 100])
        XCTAssertEqual(ChunkRanges(wireForm: set.wireForm), set)
        XCTAssertNil(ChunkRanges(wireForm: [0]), "odd count")
        XCTAssertNil(ChunkRanges(wireForm: [0, 0]), "empty range")
        XCTAssertNil(ChunkRanges(wireForm: [0, 2, 0, 3]), "touching ranges are one")
        XCTAssertNil(ChunkRanges(wireForm: [UInt64.max, 2]), "overflow")
    }

    func testChunkSealBindsKeyFileAndIndex() throws {
        var random = SplitMix64(seed: 1)
        let key = FileChunkCipher.newKey(using: &random)
        let cipher = FileChunkCipher(key: key, fileId: 9)
        let sealed = cipher.seal(Array("marker".utf8), index: 3)
        XCTAssertEqual(sealed.count, 6 + FileChunkCipher.overhead)
        XCTAssertFalse(sealed.starts(with: Array("marker".utf8)))
        XCTAssertEqual(try cipher.open(sealed, index: 3), Array("marker".utf8))
        XCTAssertEqual(cipher.seal(Array("marker".utf8), index: 3), sealed, "a chunk sent again is the same bytes")
        XCTAssertThrowsError(try cipher.open(sealed, index: 4))
        XCTAssertThrowsError(try FileChunkCipher(key: key, fileId: 10).open(sealed, index: 3))
        XCTAssertThrowsError(try FileChunkCipher(key: FileChunkCipher.newKey(using: &random), fileId: 9).open(sealed, index: 3))
    }

    func testFileFieldsSurviveTheCodecAndTheEndToEndPlaintext() throws {
        var ack = SIMPMessage(kind: .fileAck, fromUser: "bob", toUser: "alice")
        ack.fileId = 77
        ack.fileRanges = [0, 10, 5, 2]
        ack.fileSeq = 123
        ack.fileDone = true
        XCTAssertEqual(try MessageCodec.decode(MessageCodec.encode(ack)), ack)
        var chunk = SIMPMessage.fileChunk([1, 2, 3], index: 4, number: 5, fileId: 6, from: "alice", to: "bob")
        chunk.version = 1
        XCTAssertEqual(try MessageCodec.decode(MessageCodec.encode(chunk)), chunk)
        var announcement = SIMPMessage(kind: .text, messageId: 1, fromUser: "alice", toUser: "bob", content: "report.pdf")
        announcement.fileId = 88
        announcement.fileKey = [UInt8](repeating: 7, count: 32)
        announcement.fileSize = 20_000_000
        announcement.fileChunkSize = 1100
        announcement.fileDigest = [UInt8](repeating: 9, count: 32)
        let sealed = announcement.sealedEndToEnd([0xEE])
        XCTAssertEqual(sealed.fileKey, [], "the key travels only inside the envelope")
        XCTAssertEqual(sealed.fileId, 0)
        let opened = try sealed.openedEndToEnd(announcement.endToEndPlaintext)
        XCTAssertEqual(FileReceiver.Offer(opened)?.name, "report.pdf")
        XCTAssertEqual(FileReceiver.Offer(opened)?.chunkCount, 18_182)
    }

    /// A file sent in a room names it inside the end-to-end plaintext only, and a receiver
    /// keeps that room only when the relay lists both it and the sender as members.
    func testAFilesRoomTravelsOnlyInsideTheEnvelopeAndNeedsBothMembers() throws {
        var announcement = SIMPMessage(kind: .text, messageId: 1, fromUser: "alice", toUser: "bob", content: "notes.bin")
        announcement.fileId = 88
        announcement.fileRoom = "team"
        let sealed = announcement.sealedEndToEnd([0xEE])
        XCTAssertEqual(sealed.fileRoom, "", "the room travels only inside the envelope")
        XCTAssertFalse(Array(MessageCodec.encode(sealed).readableBytesView).contains(Array("team".utf8)))
        let opened = try sealed.openedEndToEnd(announcement.endToEndPlaintext)
        XCTAssertEqual(opened.fileRoom, "team")
        XCTAssertEqual(try MessageCodec.decode(MessageCodec.encode(opened)).fileRoom, "team")
        XCTAssertEqual(opened.withFileRoomChecked(members: ["alice", "bob", "carol"], user: "bob").fileRoom, "team")
        XCTAssertEqual(opened.withFileRoomChecked(members: ["bob", "carol"], user: "bob").fileRoom, "", "the sender is no member")
        XCTAssertEqual(opened.withFileRoomChecked(members: ["alice", "carol"], user: "bob").fileRoom, "", "the receiver is no member")
        XCTAssertEqual(opened.withFileRoomChecked(members: nil, user: "bob").fileRoom, "", "the relay would not list them")
    }
}
