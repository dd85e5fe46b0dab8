import NIOCore
import XCTest

@testable import SIMPCore

/// The relay's header fast path must agree with the full protobuf-c decoder whenever it answers.
final class DatagramHeaderTests: XCTestCase {
    func sample() -> SIMPMessage {
        var message = SIMPMessage(
            kind: .text, messageId: 1_795_255_557_287_153, fromUser: "alice", toUser: "bob",
            content: "hello", time: 1_700_000_000_000)
        message.attempt = 3
        return message
    }

    func bytes(_ message: SIMPMessage) -> [UInt8] {
        var buffer = MessageCodec.encode(message)
        return buffer.readBytes(length: buffer.readableBytes)!
    }

    func parse(_ bytes: [UInt8]) -> DatagramHeader? {
        bytes.withUnsafeBytes { DatagramHeader.parse($0) }
    }

    func testEncodedMessagesOfEveryKindParseLikeTheFullDecoder() throws {
        for kind in SIMPMessage.Kind.allCases {
            var message = sample()
            message.kind = kind
            message.imageURL = "https://example.com/x.png"
            message.imageScale = 0.5
            message.holdMicros = 77
            message.udpPort = 5000
            message.relayId = "r1"
            message.errorText = "text"
            let encoded = bytes(message)
            XCTAssertEqual(parse(encoded), DatagramHeader(try MessageCodec.decode(MessageCodec.encode(message))), "\(kind)")
            XCTAssertNotNil(parse(encoded), "the fast path handles every ordinary encoding (\(kind))")
        }
        XCTAssertEqual(parse([]), DatagramHeader(), "an empty message is all defaults")
    }

    func testFieldOrderRepeatsAndUnknownFieldsFollowProtobufRules() {
        // toUser twice (the last wins), fields out of order, unknown fields 2000 of each wire type.
        let encoded: [UInt8] = [
            0x3a, 0x01, 0x78, // toUser "x"
            0x80, 0x7d, 0x05, // field 2000 varint
            0x81, 0x7d, 1, 2, 3, 4, 5, 6, 7, 8, // field 2000 fixed64
            0x82, 0x7d, 0x02, 0x41, 0x42, // field 2000 bytes
            0x85, 0x7d, 1, 2, 3, 4, // field 2000 fixed32
            0x32, 0x01, 0x61, // fromUser "a"
            0x3a, 0x01, 0x62, // toUser "b"
            0x10, 0x07, 0x08, 0x01,
        ] // messageId 7, version 1
        let header = parse(encoded)
        XCTAssertEqual(header, DatagramHeader(version: 1, messageId: 7, kind: .text, fromUser: "a", toUser: "b"))
        XCTAssertEqual(header, (try? MessageCodec.decode(ByteBuffer(bytes: encoded))).map(DatagramHeader.init))
    }

    func testBatchReceiptsParseLikeTheFullDecoderAndBadBatchesAreLeftToIt() throws {
        var receipt = sample().receipt(holdMicros: 5)
        receipt.receiptIds = [3, 9, 1_795_255_557_287_100]
        let encoded = bytes(receipt)
        XCTAssertNotNil(parse(encoded), "a valid batch takes the fast path")
        XCTAssertEqual(parse(encoded), DatagramHeader(try MessageCodec.decode(MessageCodec.encode(receipt))))
        // The same differences unpacked (field 50, wire type 0), as protobuf-c also accepts.
        let unpacked: [UInt8] = [0x08, 0x01, 0x40, 0x04, 0x90, 0x03, 0x03, 0x90, 0x03, 0x06]
        XCTAssertEqual(parse(unpacked), (try? MessageCodec.decode(ByteBuffer(bytes: unpacked))).map(DatagramHeader.init))
        XCTAssertNotNil(parse(unpacked))
        for (bad, why) in [
            ([0x92, 0x03, 0x02, 0x03, 0x00], "a zero difference"),
            ([0x92, 0x03, 0x02, 0x03, 0x80], "a run that ends inside a varint"),
            ([0x90, 0x03, 0x01, 0x90, 0x03, 0x00], "an unpacked zero"),
            ([0x91, 0x03, 1, 2, 3, 4, 5, 6, 7, 8], "field 50 as fixed64"),
        ] as [([UInt8], String)] {
            XCTAssertNil(parse(bad), why)
            XCTAssertThrowsError(try MessageCodec.decode(ByteBuffer(bytes: bad)), why)
        }
        receipt.receiptIds = Array(1...UInt64(SIMPMessage.maxReceiptIds))
        XCTAssertNotNil(parse(bytes(receipt)), "the most ids a batch may carry")
        let overflowing: [UInt8] = [0x92, 0x03, 0x0b] + [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01] + [0x01]
        XCTAssertNil(parse(overflowing), "ids that overflow")
        var tooMany = ByteBuffer(bytes: bytes(receipt))
        tooMany.writeBytes([0x90, 0x03, 0x01]) // one more difference, unpacked
        XCTAssertNil(parse(Array(tooMany.readableBytesView)), "more than maxReceiptIds")
        XCTAssertThrowsError(try MessageCodec.decode(tooMany))
    }

    func testBytesTheFastPathDoesNotHandleAreLeftToTheFullDecoder() {
        XCTAssertNil(parse([0x3a, 0x03, 0x62, 0x00, 0x62]), "a NUL in a user id (the C decoder cuts there)")
        XCTAssertNil(parse([0x60, 0x01]), "errorCode, whose value the full decoder validates")
        XCTAssertNil(parse([0x12, 0x01, 0x00]), "messageId with the wrong wire type")
        XCTAssertNil(parse([0x82, 0x01, 0x01, 0x00]), "stream (field 16, from the proto's descriptor) with the wrong wire type")
        XCTAssertNil(parse([0x32, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00]), "a length prefix over 5 bytes (protobuf-c refuses it)")
        XCTAssertNil(parse([0xa3, 0x01, 0xa4, 0x01]), "a group")
        XCTAssertNil(parse([0x3a, 0x05, 0x62]), "truncated")
        XCTAssertNil(parse([0x40, 0x63]), "an unknown type")
        XCTAssertNil(parse([0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]), "an over-long varint")
        XCTAssertNil(parse([0x00, 0x01]), "field number 0")
    }

    /// Random corruptions of valid datagrams: whenever the fast path answers, the full
    /// decoder accepts the same bytes and agrees on every header field.
    func testFastPathAgreesWithFullDecoderOnCorruptedBytes() {
        var random = SplitMix64(seed: 0x5151_5eed)
        var answered = 0
        for round in 0..<20_000 {
            var message = sample()
            message.kind = SIMPMessage.Kind.allCases[round % SIMPMessage.Kind.allCases.count]
            message.toUser = String(repeating: "b", count: Int(random.next() % 20))
            var encoded = bytes(message)
            for _ in 0..<(1 + random.next() % 3) where !encoded.isEmpty {
                let index = Int(random.next() % UInt64(encoded.count))
                switch random.next() % 3 {
                case 0: encoded[index] = UInt8(truncatingIfNeeded: random.next())
                case 1: encoded.removeSubrange(index...)
                default: encoded.insert(UInt8(truncatingIfNeeded: random.next()), at: index)
                }
            }
            guard let fast = parse(encoded) else { continue }
            answered += 1
            let full = try? MessageCodec.decode(ByteBuffer(bytes: encoded))
            XCTAssertEqual(full.map(DatagramHeader.init), fast, "bytes \(encoded)")
        }
        XCTAssertGreaterThan(answered, 1000, "the corpus exercises the fast path")
    }
}
