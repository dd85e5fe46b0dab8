import SIMPChat
import XCTest

final class LineEditorTests: XCTestCase {
    private func edited(_ keys: [Key], start: LineEditor = LineEditor()) -> LineEditor {
        var editor = start
        for key in keys { _ = editor.handle(key) }
        return editor
    }

    func testTypingMovingAndDeleting() {
        let editor = edited([.text("helo"), .left, .text("l"), .end, .text("!"), .home, .delete, .text("H")])
        XCTAssertEqual(editor.text, "Hello!")
        XCTAssertEqual(editor.cursor, 1)
        let backspaced = edited([.end, .backspace, .backspace], start: editor)
        XCTAssertEqual(backspaced.text, "Hell")
        XCTAssertEqual(edited([.left, .left, .left, .left, .left, .left, .backspace], start: editor).text, "Hello!")
    }

    func testControlKeysLikeReadline() {
        let line = edited([.text("send this now")])
        XCTAssertEqual(edited([.control("w")], start: line).text, "send this ")
        XCTAssertEqual(edited([.control("a"), .control("k")], start: line).text, "")
        XCTAssertEqual(edited([.wordLeft, .control("u")], start: line).text, "now")
        let moved = edited([.control("a"), .wordRight, .control("e")], start: line)
        XCTAssertEqual(moved.cursor, 13)
        XCTAssertEqual(edited([.control("a"), .control("d")], start: line).text, "end this now")
    }

    func testEnterSubmitsAndRemembersTheLine() {
        var editor = edited([.text("hi")])
        XCTAssertEqual(editor.handle(.enter), .submitted("hi"))
        XCTAssertEqual(editor.text, "")
        XCTAssertEqual(editor.history, ["hi"])
        XCTAssertEqual(editor.handle(.enter), .submitted(""))
        XCTAssertEqual(editor.history, ["hi"], "blank lines are not remembered")
    }

    func testHistoryBrowsingKeepsTheUnfinishedLine() {
        var editor = LineEditor(history: ["first", "second"])
        editor = edited([.text("draft"), .up], start: editor)
        XCTAssertEqual(editor.text, "second")
        editor = edited([.up, .up], start: editor)
        XCTAssertEqual(editor.text, "first", "stops at the oldest")
        editor = edited([.down], start: editor)
        XCTAssertEqual(editor.text, "second")
        editor = edited([.down], start: editor)
        XCTAssertEqual(editor.text, "draft")
        XCTAssertEqual(editor.cursor, 5)
    }

    func testCtrlCClearsThenInterruptsAndCtrlDEndsOnlyAnEmptyLine() {
        var editor = edited([.text("abc")])
        XCTAssertEqual(editor.handle(.control("c")), .edited)
        XCTAssertEqual(editor.text, "")
        XCTAssertEqual(editor.handle(.control("c")), .interrupted)
        XCTAssertEqual(editor.handle(.control("d")), .endOfInput)
        XCTAssertEqual(editor.handle(.control("l")), .redraw)
    }

    func testCursorCountsCharactersNotBytesAndCombiningMarksJoin() {
        var editor = edited([.text("日本"), .left, .text("e"), .text("\u{301}")])
        XCTAssertEqual(editor.text, "日é本")
        XCTAssertEqual(editor.cursor, 2)
        editor = edited([.backspace], start: editor)
        XCTAssertEqual(editor.text, "日本")
        XCTAssertEqual(edited([.text("👍🏽x"), .left, .backspace]).text, "x")
    }

    func testPastedControlCharactersAreDropped() {
        XCTAssertEqual(edited([.text("a\u{7}b")]).text, "ab")
    }
}

final class DisplayWidthTests: XCTestCase {
    func testWideCombiningAndEmoji() {
        XCTAssertEqual(DisplayWidth.of("abc"), 3)
        XCTAssertEqual(DisplayWidth.of("日本"), 4)
        XCTAssertEqual(DisplayWidth.of("e\u{301}"), 1)
        XCTAssertEqual(DisplayWidth.of("👍"), 2)
        XCTAssertEqual(DisplayWidth.of("✓✓"), 2)
        XCTAssertEqual(DisplayWidth.of("\u{2764}\u{FE0F}"), 2)
    }
}
