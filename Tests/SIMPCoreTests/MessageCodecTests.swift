import NIOCore
import SIMPCore
import XCTest

final class MessageCodecTests: XCTestCase {
    private func populated(_ kind: SIMPMessage.Kind) -> SIMPMessage {
        var message = SIMPMessage(
            kind: kind, messageId: 0xDEAD_BEEF_CAFE, fromUser: "alice", toUser: "bøb 🚀",
            content: "héllo, 世界 👋", time: 1_700_000_000_123)
        message.imageURL = "https://example.test/ü.png"
        message.imageScale = 0.75
        message.attempt = 3
        message.holdMicros = 4_500
        message.errorCode = .unknownRecipient
        message.errorText = "no such user ✗"
        message.udpPort = 50_123
        message.relayId = "relay-ä"
        message.custodyFloor = 41
        message.receiverOnline = true
        return message
    }

    private func decode(_ bytes: [UInt8]) throws -> SIMPMessage {
        try MessageCodec.decode(ByteBuffer(bytes: bytes))
    }

    func testEveryKindRoundTripsWithAllFieldsPopulated() throws {
        for kind in SIMPMessage.Kind.allCases {
            let message = populated(kind)
            let encoded = MessageCodec.encode(message)
            XCTAssertEqual(encoded.readableBytes, MessageCodec.encodedSize(of: message), "\(kind)")
            XCTAssertEqual(try MessageCodec.decode(encoded), message, "\(kind)")
        }
    }

    func testEveryErrorCodeRoundTrips() throws {
        for code in SIMPMessage.ErrorCode.allCases {
            let message = SIMPMessage.error(code, "because", messageId: 7, to: "alice")
            XCTAssertEqual(try MessageCodec.decode(MessageCodec.encode(message)), message, "\(code)")
        }
    }

    func testEmptyMessageRoundTrips() throws {
        XCTAssertEqual(try MessageCodec.decode(MessageCodec.encode(SIMPMessage())), SIMPMessage())
        // Zero bytes are a valid protobuf message with every field at its default.
        var allDefaults = SIMPMessage()
        allDefaults.version = 0
        XCTAssertEqual(try decode([]), allDefaults)
    }

    func testGarbageThrowsMalformed() {
        let samples: [[UInt8]] = [
            [0xFF, 0xFF, 0xFF], // unterminated tag varint
            [0x0F, 0x00], // wire type 7 does not exist
            [0x22, 0x05, 0x61], // content announces 5 bytes, 1 follows
        ]
        for bytes in samples {
            XCTAssertThrowsError(try decode(bytes), "\(bytes)") { XCTAssertEqual($0 as? DecodeError, .malformed) }
        }
    }

    func testTruncatedEncodingThrows() {
        let encoded = MessageCodec.encode(populated(.image))
        let truncated = encoded.getSlice(at: encoded.readerIndex, length: encoded.readableBytes - 1)!
        XCTAssertThrowsError(try MessageCodec.decode(truncated)) { XCTAssertEqual($0 as? DecodeError, .malformed) }
    }

    func testUnknownEnumValuesThrow() {
        // Field 8 (type), varint 99.
        XCTAssertThrowsError(try decode([0x40, 0x63])) { XCTAssertEqual($0 as? DecodeError, .unknownEnumValue) }
        // Field 12 (errorCode), varint 99.
        XCTAssertThrowsError(try decode([0x60, 0x63])) { XCTAssertEqual($0 as? DecodeError, .unknownEnumValue) }
    }

    func testOriginalFieldNumbersAreFrozen() throws {
        let bytes: [UInt8] = [
            0x08, 0x01, // 1 version = 1
            0x10, 0xAC, 0x02, // 2 messageId = 300
            0x18, 0x2A, // 3 time = 42
            0x22, 0x02, 0x68, 0x69, // 4 content = "hi"
            0x2A, 0x01, 0x75, // 5 imageURL = "u"
            0x32, 0x05, 0x61, 0x6C, 0x69, 0x63, 0x65, // 6 fromUser = "alice"
            0x3A, 0x03, 0x62, 0x6F, 0x62, // 7 toUser = "bob"
            0x40, 0x01, // 8 type = IMAGE
            0x4D, 0x00, 0x00, 0x00, 0x3F, // 9 imageScale = 0.5
        ]
        let message = try decode(bytes)
        XCTAssertEqual(message.version, 1)
        XCTAssertEqual(message.messageId, 300)
        XCTAssertEqual(message.time, 42)
        XCTAssertEqual(message.content, "hi")
        XCTAssertEqual(message.imageURL, "u")
        XCTAssertEqual(message.fromUser, "alice")
        XCTAssertEqual(message.toUser, "bob")
        XCTAssertEqual(message.kind, .image)
        XCTAssertEqual(message.imageScale, 0.5)

        // And the encoder writes the same numbers.
        let receipt = SIMPMessage(kind: .receipt, messageId: 300, fromUser: "al", toUser: "bo")
        XCTAssertEqual(
            Array(MessageCodec.encode(receipt).readableBytesView),
            [0x08, 0x01, 0x10, 0xAC, 0x02, 0x32, 0x02, 0x61, 0x6C, 0x3A, 0x02, 0x62, 0x6F, 0x40, 0x04])
    }

    /// Every field set (none at its default), repeated fields with an empty element among
    /// others: each comes back, and the size the encoder reports is the size it writes.
    private func everyFieldSet() -> SIMPMessage {
        var message = populated(.fileChunk)
        message.version = 7
        message.stream = 11
        message.seq = 12
        message.floor = 13
        message.nonce = [1, 2, 3]
        message.salt = [4, 5]
        message.iterations = 14
        message.proof = [6]
        message.sessionId = 15
        message.sessionSecret = [7, 8, 9, 10]
        message.retryAfterMillis = 16
        message.maxDatagramSize = 17
        message.status = .stored
        message.room = "#räum"
        message.members = ["carol", "", "dävid 🎈"]
        message.author = "erin"
        message.authorMessageId = 18
        message.memberCount = 19
        message.deliveredCount = 20
        message.online = true
        message.lastSeen = 21
        message.device = "phone"
        message.sendOnly = true
        message.hidePresence = true
        message.receiptIds = [3, 9, 10, 1_000_000]
        message.batchReceipts = true
        message.held = true
        message.messageRateLimit = 22
        message.acceptsBatchReceipts = true
        message.datagram = [11, 12]
        message.token = "eyJ.token"
        message.tokenExpires = 23
        message.e2ePayload = Array(repeating: 0xE2, count: 300)
        message.keyBundles = [[13, 14], [], [15]]
        message.oneTimePrekeys = [[16], [17, 18, 19]]
        message.prekeysLeft = 24
        message.loginAddress = "127.0.0.1:9"
        message.devicesLeftOut = 25
        message.fileId = 26
        message.chunkIndex = 27
        message.chunk = [20, 21, 22]
        message.fileRanges = [0, 4, 2, 8]
        message.fileSeq = 28
        message.fileChunkSize = 29
        message.fileDone = true
        message.fileKey = Array(repeating: 0x4B, count: 32)
        message.fileSize = 30
        message.fileDigest = Array(repeating: 0xD1, count: 32)
        message.fileRoom = "team"
        message.deviceList = Array(repeating: 0xDE, count: 40)
        message.fileHeld = true
        message.fileReceived = true
        message.directoryProof = DirectoryProof(
            treeHead: Array(repeating: 0xA1, count: 113), treeKey: Array(repeating: 0xA2, count: 32), logIndex: 150,
            inclusionProof: Array(repeating: 0xA3, count: 64), knownTreeSize: 154, consistencyProof: Array(repeating: 0xA5, count: 96))
        message.directoryProof.directoryCheckpoint = Array(repeating: 0xA6, count: 40)
        message.directoryProof.peerTreeSize = 157
        message.directoryProof.peerConsistencyProof = Array(repeating: 0xA8, count: 32)
        return message
    }

    func testEveryFieldRoundTrips() throws {
        let message = everyFieldSet()
        let defaults = Mirror(reflecting: SIMPMessage()).children.map { "\($0.value)" }
        for (index, field) in Mirror(reflecting: message).children.enumerated() {
            XCTAssertNotEqual("\(field.value)", defaults[index], "\(field.label ?? "?") is at its default: set it above")
        }
        let encoded = MessageCodec.encode(message)
        XCTAssertEqual(encoded.readableBytes, MessageCodec.encodedSize(of: message))
        XCTAssertEqual(try MessageCodec.decode(encoded), message)
    }

    func testFileFieldsAloneRoundTrip() throws {
        // Each file field alone makes the message one of a file transfer.
        var ack = SIMPMessage(kind: .fileAck, messageId: 1, fromUser: "a", toUser: "b")
        ack.fileRanges = [0, 3]
        XCTAssertEqual(try MessageCodec.decode(MessageCodec.encode(ack)), ack)
        var done = SIMPMessage(kind: .fileAck, messageId: 2, fromUser: "a", toUser: "b")
        done.fileDone = true
        XCTAssertEqual(try MessageCodec.decode(MessageCodec.encode(done)), done)
        var announcement = SIMPMessage(kind: .text, messageId: 3, fromUser: "a", toUser: "b")
        announcement.fileDigest = [1]
        XCTAssertEqual(try MessageCodec.decode(MessageCodec.encode(announcement)), announcement)
        var inRoom = SIMPMessage(kind: .text, messageId: 5, fromUser: "a", toUser: "b")
        inRoom.fileRoom = "team"
        XCTAssertEqual(try MessageCodec.decode(MessageCodec.encode(inRoom)), inRoom)
        var held = SIMPMessage(kind: .fileAck, messageId: 4, fromUser: "a", toUser: "b")
        held.fileHeld = true
        XCTAssertEqual(try MessageCodec.decode(MessageCodec.encode(held)), held)
    }
}
