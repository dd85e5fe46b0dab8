import NIOCore
import NIOEmbedded
import SIMPCore
import SIMPNIO
import XCTest

/// The control pipeline's framing handlers: frames out of reads cut anywhere, an oversized
/// frame reported once and nothing read after it, and messages written as whole frames.
final class ControlFramingHandlerTests: XCTestCase {
    private func frames(_ messages: SIMPMessage...) -> ByteBuffer {
        var buffer = ByteBuffer()
        for message in messages { Framing.writeFrame(message, into: &buffer) }
        return buffer
    }

    private func inbound(_ channel: EmbeddedChannel) throws -> [SIMPMessage] {
        var messages: [SIMPMessage] = []
        while let payload = try channel.readInbound(as: ByteBuffer.self) { messages.append(try MessageCodec.decode(payload)) }
        return messages
    }

    func testFramesCutAcrossReadsArriveWholeAndInOrder() throws {
        let channel = EmbeddedChannel(handler: FrameDecoderHandler())
        let first = SIMPMessage(kind: .ping, messageId: 1), second = SIMPMessage(kind: .receipt, messageId: 2, fromUser: "bob", toUser: "al")
        var stream = frames(first, second)
        // One byte, then the rest of the first frame and part of the second, then the end.
        for length in [1, stream.readableBytes / 2, stream.readableBytes - stream.readableBytes / 2 - 1] {
            try channel.writeInbound(stream.readSlice(length: length)!)
        }
        XCTAssertEqual(try inbound(channel), [first, second])
        XCTAssertNoThrow(try channel.finish())
    }

    func testAnOversizedFrameIsReportedOnceAndNothingIsReadAfterIt() throws {
        let channel = EmbeddedChannel(handler: FrameDecoderHandler(maxFrameSize: 16))
        var tooLarge = ByteBuffer()
        tooLarge.writeInteger(UInt32(17))
        XCTAssertThrowsError(try channel.writeInbound(tooLarge)) { error in
            let tooLarge = error as? FrameTooLargeError
            XCTAssertEqual(tooLarge?.announcedSize, 17)
            XCTAssertEqual(tooLarge?.maxFrameSize, 16)
        }
        XCTAssertNoThrow(try channel.writeInbound(frames(SIMPMessage(kind: .ping, messageId: 1))))
        XCTAssertEqual(try inbound(channel), [])
    }

    func testMessagesAreWrittenAsOneFrameEach() throws {
        let channel = EmbeddedChannel(handler: FrameEncoderHandler())
        let message = SIMPMessage(kind: .receipt, messageId: 9, fromUser: "bob", toUser: "alice")
        try channel.writeOutbound(message)
        try channel.writeOutbound(SIMPMessage(kind: .pong, messageId: 3))
        XCTAssertEqual(try channel.readOutbound(as: ByteBuffer.self), frames(message))
        XCTAssertEqual(try channel.readOutbound(as: ByteBuffer.self), frames(SIMPMessage(kind: .pong, messageId: 3)))
        XCTAssertNil(try channel.readOutbound(as: ByteBuffer.self))
    }
}
