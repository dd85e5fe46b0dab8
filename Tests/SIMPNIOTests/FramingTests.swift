import NIOCore
import SIMPCore
import SIMPNIO
import XCTest

final class FramingTests: XCTestCase {
    private func frames(_ message: SIMPMessage...) -> ByteBuffer {
        var buffer = ByteBuffer()
        for m in message { Framing.writeFrame(m, into: &buffer) }
        return buffer
    }

    private func rawFrame(length: UInt32, payload: [UInt8]) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeInteger(length)
        buffer.writeBytes(payload)
        return buffer
    }

    private func feed(_ chunks: [ByteBuffer], maxFrameSize: Int = Framing.defaultMaxFrameSize) throws -> [ByteBuffer] {
        let processor = NIOSingleStepByteToMessageProcessor(FrameDecoder(maxFrameSize: maxFrameSize))
        var payloads: [ByteBuffer] = []
        for chunk in chunks { try processor.process(buffer: chunk) { payloads.append($0) } }
        return payloads
    }

    func testFrameSplitByteByByteYieldsOnePayload() throws {
        let message = SIMPMessage(kind: .ping, messageId: 77, content: "split me")
        let stream = frames(message)
        let processor = NIOSingleStepByteToMessageProcessor(FrameDecoder())
        var payloads: [ByteBuffer] = []
        for (i, byte) in stream.readableBytesView.enumerated() {
            try processor.process(buffer: ByteBuffer(bytes: [byte])) { payloads.append($0) }
            XCTAssertEqual(payloads.count, i == stream.readableBytes - 1 ? 1 : 0, "after byte \(i)")
        }
        XCTAssertEqual(try MessageCodec.decode(payloads[0]), message)
    }

    func testMergedFramesYieldEveryPayloadInOrder() throws {
        let messages = (1...3).map { SIMPMessage(kind: .ping, messageId: UInt64($0), content: String(repeating: "x", count: $0)) }
        let payloads = try feed([frames(messages[0], messages[1], messages[2])])
        XCTAssertEqual(try payloads.map(MessageCodec.decode), messages)
    }

    func testOversizedFrameThrowsBeforePayloadArrives() {
        let header = rawFrame(length: 17, payload: [])
        XCTAssertThrowsError(try feed([header], maxFrameSize: 16)) {
            let error = $0 as? FrameTooLargeError
            XCTAssertEqual(error?.announcedSize, 17)
            XCTAssertEqual(error?.maxFrameSize, 16)
        }
    }

    func testFrameOfExactlyMaxSizeIsAccepted() throws {
        let payload = [UInt8](1...16)
        let payloads = try feed([rawFrame(length: 16, payload: payload)], maxFrameSize: 16)
        XCTAssertEqual(payloads.map { Array($0.readableBytesView) }, [payload])
    }

    func testZeroLengthFrameYieldsEmptyPayload() throws {
        var stream = rawFrame(length: 0, payload: [])
        stream.writeImmutableBuffer(rawFrame(length: 1, payload: [0xAB]))
        let payloads = try feed([stream])
        XCTAssertEqual(payloads.map { Array($0.readableBytesView) }, [[], [0xAB]])
    }

    func testEncoderOutputDecodesToTheSameMessage() throws {
        var message = SIMPMessage(kind: .receipt, messageId: 9, fromUser: "bob", toUser: "alice")
        message.attempt = 2
        var out = ByteBuffer()
        try FrameEncoder().encode(data: message, out: &out)
        XCTAssertEqual(out, frames(message))
        XCTAssertEqual(out.getInteger(at: out.readerIndex, as: UInt32.self).map(Int.init), out.readableBytes - Framing.headerSize)
        let payloads = try feed([out])
        XCTAssertEqual(try payloads.map(MessageCodec.decode), [message])
    }

    func testAnEncodedPayloadMakesTheFrameOfItsMessage() throws {
        let messages = [SIMPMessage(), SIMPMessage(kind: .receipt, messageId: 7, fromUser: "bob", toUser: "alice")]
        var byPayload = ByteBuffer(bytes: [0xEE]), byMessage = ByteBuffer(bytes: [0xEE]) // appended after what is there
        for message in messages {
            Framing.writeFrame(payload: MessageCodec.encode(message), into: &byPayload)
            Framing.writeFrame(message, into: &byMessage)
        }
        XCTAssertEqual(byPayload, byMessage)
        byPayload.moveReaderIndex(forwardBy: 1)
        XCTAssertEqual(try feed([byPayload]).map(MessageCodec.decode), messages)
    }
}
