import Glibc
import SIMPChat
import XCTest

/// `DisplayWidth` asks the C library's wcwidth(3), in a UTF-8 locale of its own: the columns of
/// each kind of character, whatever the process's locale.
final class TerminalColumnsTests: XCTestCase {
    func testEastAsianWideAndFullwidthCharactersTakeTwoColumns() {
        // CJK, Hangul, kana, fullwidth A, ideographic space, CJK Extension B.
        XCTAssertEqual(widths(["中", "日", "한", "ア", "Ａ", "\u{3000}", "𠀀"]), [2, 2, 2, 2, 2, 2, 2])
        // Wide ranges the hand-kept table missed (it counted these one column each).
        XCTAssertEqual(widths(["\u{2329}", "\u{FE10}", "\u{A960}", "\u{17000}", "\u{1B000}"]), [2, 2, 2, 2, 2])
    }

    func testEmojiTakeTwoColumnsWhateverFollowsThem() {
        XCTAssertEqual(widths(["😀", "🚀", "🪀", "⌚"]), [2, 2, 2, 2])
        XCTAssertEqual(DisplayWidth.of("👍🏽"), 2, "a skin-tone modifier draws over its emoji")
        XCTAssertEqual(DisplayWidth.of("👨\u{200D}👩\u{200D}👧"), 2, "a family joined by ZWJ is one emoji")
        XCTAssertEqual(DisplayWidth.of("🇩🇪"), 2, "a flag (two regional indicators)")
        XCTAssertEqual(DisplayWidth.of("\u{2764}"), 1, "a heart without a variation selector is a text symbol")
        XCTAssertEqual(DisplayWidth.of("\u{2764}\u{FE0F}"), 2, "with U+FE0F it is an emoji")
        XCTAssertEqual(DisplayWidth.of("1\u{FE0F}\u{20E3}"), 2, "a keycap")
    }

    func testCombiningMarksAndJoinersTakeNone() {
        XCTAssertEqual(DisplayWidth.of("e\u{301}"), 1, "e + COMBINING ACUTE ACCENT is one cluster")
        XCTAssertEqual(DisplayWidth.of("\u{301}"), 0, "a mark on its own")
        XCTAssertEqual(DisplayWidth.of("a\u{200B}b"), 2, "ZERO WIDTH SPACE")
        XCTAssertEqual(DisplayWidth.of("\u{1100}\u{1161}"), 2, "a Hangul syllable written as jamo: lead wide, vowel none")
        XCTAssertEqual(widths(["é", "Ж", "✓", "\u{E000}"]), [1, 1, 1, 1], "accented, Cyrillic, a check mark, private use")
    }

    func testControlCharactersTakeNone() {
        XCTAssertEqual(widths(["\u{0}", "\u{7}", "\u{1B}", "\u{7F}", "\u{85}", "\u{9F}"]), [0, 0, 0, 0, 0, 0])
        XCTAssertEqual(DisplayWidth.of("a\tb\u{7}"), 2)
    }

    /// `simp chat` under LANG=C: the process's C locale (where wcwidth answers -1 for anything
    /// outside ASCII) does not reach the answer.
    func testTheProcessLocaleDoesNotChangeTheAnswer() throws {
        let saved = String(cString: try XCTUnwrap(setlocale(LC_ALL, nil)))
        defer { setlocale(LC_ALL, saved) }
        XCTAssertNotNil(setlocale(LC_ALL, "C"))
        XCTAssertEqual(DisplayWidth.of("日本 e\u{301} 👍"), 4 + 1 + 1 + 1 + 2)
    }

    private func widths(_ characters: [Character]) -> [Int] { characters.map { DisplayWidth.of($0) } }
}
