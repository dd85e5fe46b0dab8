import SIMPChat
import XCTest

final class KeyDecoderTests: XCTestCase {
    func testPrintableBytesBecomeOneTextRun() {
        var decoder = KeyDecoder()
        XCTAssertEqual(decoder.feed(Array("héllo".utf8)), [.text("héllo")])
    }

    func testUTF8CharacterSplitAcrossReadsIsHeldUntilComplete() {
        var decoder = KeyDecoder()
        let bytes = Array("✓".utf8) // 3 bytes
        XCTAssertEqual(decoder.feed(bytes[0..<1]), [])
        XCTAssertTrue(decoder.hasPending)
        XCTAssertEqual(decoder.feed(bytes[1..<2]), [])
        XCTAssertEqual(decoder.feed(bytes[2..<3]), [.text("✓")])
        XCTAssertFalse(decoder.hasPending)
    }

    func testArrowAndEditingSequences() {
        var decoder = KeyDecoder()
        let input = "\u{1B}[A\u{1B}[B\u{1B}[C\u{1B}[D\u{1B}[H\u{1B}[F\u{1B}OH\u{1B}OF\u{1B}[1~\u{1B}[4~\u{1B}[3~"
        XCTAssertEqual(
            decoder.feed(Array(input.utf8)),
            [.up, .down, .right, .left, .home, .end, .home, .end, .home, .end, .delete])
    }

    func testSequenceSplitAcrossReads() {
        var decoder = KeyDecoder()
        XCTAssertEqual(decoder.feed(Array("a\u{1B}".utf8)), [.text("a")])
        XCTAssertEqual(decoder.feed(Array("[".utf8)), [])
        XCTAssertEqual(decoder.feed(Array("3".utf8)), [])
        XCTAssertEqual(decoder.feed(Array("~b".utf8)), [.delete, .text("b")])
    }

    func testControlKeysEnterBackspaceTab() {
        var decoder = KeyDecoder()
        XCTAssertEqual(
            decoder.feed([0x01, 0x05, 0x15, 0x17, 0x03, 0x04, 0x0D, 0x7F, 0x08, 0x09]),
            [
                .control("a"), .control("e"), .control("u"), .control("w"), .control("c"), .control("d"),
                .enter, .backspace, .backspace, .tab,
            ])
    }

    func testModifiedArrowsAndAltKeysMoveByWord() {
        var decoder = KeyDecoder()
        XCTAssertEqual(
            decoder.feed(Array("\u{1B}[1;5D\u{1B}[1;5C\u{1B}b\u{1B}f".utf8)),
            [.wordLeft, .wordRight, .wordLeft, .wordRight])
    }

    func testLoneEscapeIsHeldThenFlushedAsEscape() {
        var decoder = KeyDecoder()
        XCTAssertEqual(decoder.feed([0x1B]), [])
        XCTAssertEqual(decoder.flush(), [.escape])
        XCTAssertFalse(decoder.hasPending)
        XCTAssertEqual(decoder.feed(Array("x".utf8)), [.text("x")])
    }

    func testUnknownSequencesAndInvalidBytesAreNotText() {
        var decoder = KeyDecoder()
        XCTAssertEqual(
            decoder.feed(Array("\u{1B}[200~".utf8) + [0xFF] + Array("ok".utf8)),
            [.unknown, .unknown, .text("ok")])
    }
}
