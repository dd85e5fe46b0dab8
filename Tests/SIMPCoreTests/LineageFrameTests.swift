import NIOCore
import SIMPCore
import XCTest

/// Frames from the original SIMP lineage (`float version = 1`) are recognised and answered with
/// UNSUPPORTED_VERSION and a reason, instead of "malformed control frame".
final class LineageFrameTests: XCTestCase {
    /// CONNECT from alice as the original SIMP Message encodes it: version 1.0 as fixed32,
    /// messageId 42, time 1700000000000 as uint64, fromUser, type CONNECT.
    private let lineageConnect: [UInt8] = [
        0x0D, 0x00, 0x00, 0x80, 0x3F, // field 1 (version), fixed32 1.0
        0x10, 0x2A, // field 2 (messageId), 42
        0x18, 0x80, 0xD0, 0x95, 0xFF, 0xBC, 0x31, // field 3 (time), 1700000000000
        0x32, 0x05, 0x61, 0x6C, 0x69, 0x63, 0x65, // field 6 (fromUser), "alice"
        0x40, 0x03, // field 8 (type), CONNECT
    ]

    func testALineageFrameIsMalformedForTheCodecButRecognised() throws {
        let payload = ByteBuffer(bytes: lineageConnect)
        XCTAssertThrowsError(try MessageCodec.decode(payload), "protobuf-c refuses the fixed32 version")

        let lineage = try XCTUnwrap(LineageFrame.detect(payload))

        XCTAssertEqual(lineage.version, 1.0)
        XCTAssertEqual(lineage.messageId, 42)
        let answer = lineage.answer
        XCTAssertEqual(answer.kind, .error)
        XCTAssertEqual(answer.errorCode, .unsupportedVersion)
        XCTAssertEqual(answer.messageId, 42)
        XCTAssertTrue(answer.errorText.contains("float version (1.0)"), answer.errorText)
        XCTAssertTrue(answer.errorText.contains("uint32"), answer.errorText)
        XCTAssertEqual(try MessageCodec.decode(MessageCodec.encode(answer)), answer, "the answer encodes")
    }

    func testCurrentAndBrokenFramesAreNotLineageFrames() {
        let current = MessageCodec.encode(SIMPMessage(kind: .ping, messageId: 42))
        XCTAssertNil(LineageFrame.detect(current), "version as a varint")
        XCTAssertNil(LineageFrame.detect(ByteBuffer(bytes: lineageConnect.dropLast(3))), "truncated string")
        XCTAssertNil(LineageFrame.detect(ByteBuffer(bytes: [0x0D, 0x00, 0x00])), "truncated fixed32")
        XCTAssertNil(LineageFrame.detect(ByteBuffer(bytes: [0x10, 0x2A])), "no version at all")
        XCTAssertNil(LineageFrame.detect(ByteBuffer(bytes: [0x0B, 0x0D, 0x00, 0x00, 0x80, 0x3F])), "a group")
        XCTAssertNil(
            LineageFrame.detect(ByteBuffer(bytes: [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01])),
            "an over-long varint")
    }
}
