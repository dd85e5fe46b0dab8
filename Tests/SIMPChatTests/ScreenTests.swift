import SIMPChat
import SIMPTestSupport
import XCTest

final class ScreenTests: XCTestCase {
    let input = InputLine(prompt: "bob> ", text: "half typed", cursor: 4)

    func testPrintedLinesGoAboveTheInputLineWhichIsRedrawnIntact() {
        var screen = Screen(width: 40, height: 5, interactive: true, colors: false)
        var terminal = VirtualTerminal(width: 40, height: 5)
        terminal.feed(screen.draw(input))
        for number in 1...6 { terminal.feed(screen.print(StyledText("line \(number)"), input: input).output) }

        XCTAssertEqual(terminal.lines, ["line 3", "line 4", "line 5", "line 6", "bob> half typed"])
        XCTAssertEqual(terminal.cursorRow, 4)
        XCTAssertEqual(terminal.cursorColumn, 9, "the cursor stays where the user was typing")
    }

    func testALineStillOnScreenIsRewrittenInPlace() {
        var screen = Screen(width: 40, height: 5, interactive: true, colors: false)
        var terminal = VirtualTerminal(width: 40, height: 5)
        let (output, row) = screen.print("me: hi …", input: input)
        terminal.feed(output)
        terminal.feed(screen.print("bob: yo", input: input).output)
        let rewrite = screen.rewrite(row: row, with: "me: hi ✓✓", input: input)
        XCTAssertNotNil(rewrite)
        terminal.feed(rewrite ?? "")
        XCTAssertEqual(terminal.transcript, ["me: hi ✓✓", "bob: yo", "bob> half typed"])

        for _ in 1...4 { terminal.feed(screen.print("more", input: input).output) }
        XCTAssertNil(
            screen.rewrite(row: row, with: "me: hi ✗", input: input),
            "scrolled off: the caller prints a follow-up line instead")
        XCTAssertEqual(screen.scrollback.first, "me: hi ✗", "the scrollback has the new version")
    }

    /// A line on screen rewritten with another number of rows (a file's progress growing past
    /// the width, then ✓✓): the screen is drawn again, and the lines above it stay intact.
    func testALineThatChangesItsNumberOfRowsIsDrawnAgainWithTheLinesAboveIntact() {
        var screen = Screen(width: 20, height: 6, interactive: true, colors: false)
        var terminal = VirtualTerminal(width: 20, height: 6)
        terminal.feed(screen.print("older line", input: input).output)
        let (output, row) = screen.print("me: a.bin …", input: input)
        terminal.feed(output)
        for progress in ["1.0 MB of 2.0 MB, 5.0 MB/s", "1.5 MB of 2.0 MB, 5.1 MB/s", "✓✓"] {
            let rewrite = screen.rewrite(row: row, with: StyledText("me: a.bin " + progress), input: input)
            XCTAssertNotNil(rewrite, progress)
            terminal.feed(rewrite ?? "")
        }
        XCTAssertEqual(terminal.lines.suffix(3), ["older line", "me: a.bin ✓✓", "bob> half typed"])
        XCTAssertEqual(terminal.transcript.filter { $0 == "older line" }.count, 1, terminal.transcript.joined(separator: "\n"))

        for _ in 1...6 { terminal.feed(screen.print("more", input: input).output) }
        XCTAssertNil(screen.rewrite(row: row, with: "me: a.bin ✗ the receiver refused the file", input: input), "off screen")
    }

    func testLongInputScrollsHorizontallyToKeepTheCursorVisibleAndMarksHiddenText() {
        let screen = Screen(width: 20, height: 5, interactive: true, colors: false)
        var terminal = VirtualTerminal(width: 20, height: 5)
        let text = "abcdefghijklmnopqrstuvwxyz"
        terminal.feed(screen.draw(InputLine(prompt: "> ", text: text, cursor: text.count)))
        XCTAssertTrue(terminal.cursorLine.hasPrefix("> …"), "text scrolled out on the left is marked: \(terminal.cursorLine)")
        XCTAssertTrue(terminal.cursorLine.hasSuffix("xyz"), terminal.cursorLine)
        XCTAssertLessThan(terminal.cursorLine.count, 20)
        XCTAssertEqual(terminal.cursorColumn, terminal.cursorLine.count)

        terminal.feed(screen.draw(InputLine(prompt: "> ", text: text, cursor: 0)))
        XCTAssertEqual(terminal.cursorLine.first(where: { $0 == "…" }), "…")
        XCTAssertTrue(
            terminal.cursorLine.hasPrefix("> abc") && terminal.cursorLine.hasSuffix("…"),
            "text beyond the right edge is marked: \(terminal.cursorLine)")
        XCTAssertEqual(terminal.cursorColumn, 2)
        terminal.feed(screen.draw(InputLine(prompt: "> ", text: "short", cursor: 5)))
        XCTAssertEqual(terminal.cursorLine, "> short", "no marker when everything fits")
    }

    func testLongLinesWrapAtWordBoundaries() {
        var screen = Screen(width: 20, height: 6, interactive: true, colors: false)
        var terminal = VirtualTerminal(width: 20, height: 6)
        let (output, row) = screen.print("you → bob: the quick brown fox jumps", input: input)
        terminal.feed(output)
        XCTAssertEqual(Array(terminal.transcript.prefix(3)), ["you → bob: the quick", "brown fox jumps", "bob> half typed"])
        terminal.feed(screen.rewrite(row: row, with: "you → bob: the quick brown fox jumps ✓✓", input: input) ?? "")
        XCTAssertEqual(
            terminal.lines.prefix(3), ["you → bob: the quick", "brown fox jumps ✓✓", "bob> half typed"],
            "a wrapped line is rewritten in place while it keeps its number of rows")
        XCTAssertEqual(
            StyledText("a-very-long-word-without-spaces").wrapped(width: 10).map(\.plain),
            ["a-very-lon", "g-word-wit", "hout-space", "s"], "a word longer than a row is cut")
        XCTAssertEqual(
            (StyledText("ab ", .dim) + StyledText("cd ef", .bold)).wrapped(width: 4),
            [StyledText("ab ", .dim), StyledText("cd ", .bold), StyledText("ef", .bold)], "colours stay with their text")
    }

    func testPageUpAndPageDownMoveThroughTheScrollback() {
        var screen = Screen(width: 30, height: 5, interactive: true, colors: false)
        var terminal = VirtualTerminal(width: 30, height: 5)
        for number in 1...12 { terminal.feed(screen.print(StyledText("line \(number)"), input: input).output) }
        XCTAssertEqual(terminal.lines.prefix(4), ["line 9", "line 10", "line 11", "line 12"])
        terminal.feed(screen.pageUp(input))
        XCTAssertEqual(terminal.lines.prefix(4), ["line 6", "line 7", "line 8", "line 9"])
        XCTAssertTrue(terminal.cursorLine.hasPrefix("[3 more ↓] bob> "), terminal.cursorLine)
        terminal.feed(screen.print("line 13", input: input).output)
        XCTAssertEqual(terminal.lines.prefix(4), ["line 6", "line 7", "line 8", "line 9"], "the view stays while reading back")
        XCTAssertTrue(terminal.cursorLine.hasPrefix("[4 more ↓]"), terminal.cursorLine)
        for _ in 1...10 { terminal.feed(screen.pageUp(input)) }
        XCTAssertEqual(terminal.lines.prefix(4), ["line 1", "line 2", "line 3", "line 4"], "stops at the top")
        for _ in 1...10 { terminal.feed(screen.pageDown(input)) }
        XCTAssertEqual(terminal.lines, ["line 10", "line 11", "line 12", "line 13", "bob> half typed"], "back to following")
    }

    func testColoursOnlyWhenAskedAndPlainOutputHasNoEscapes() {
        let line = StyledText("bob", .peer) + StyledText(": hi")
        var coloured = Screen(interactive: true, colors: true)
        XCTAssertTrue(coloured.print(line, input: nil).output.contains("\u{1B}[1;36mbob\u{1B}[0m"))
        var uncoloured = Screen(interactive: true, colors: false)
        XCTAssertFalse(uncoloured.print(line, input: nil).output.contains("\u{1B}[1;36m"))
        var plain = Screen(interactive: false, colors: true)
        XCTAssertEqual(plain.print(line, input: input).output, "bob: hi\n")
        XCTAssertEqual(plain.draw(input), "")
    }

    func testAPaletteChangesColoursByNameOrCode() throws {
        let palette = try Palette(changing: "peer=bold yellow, me=1;32,link=none")
        XCTAssertEqual(palette.codes[.peer], "1;33")
        XCTAssertEqual(palette.codes[.me], "1;32")
        XCTAssertEqual(palette.codes[.failure], Palette.standard.codes[.failure], "the others stay")
        var screen = Screen(interactive: true, colors: true)
        screen.palette = palette
        let output = screen.print(StyledText("bob", .peer) + StyledText(" https://x", .link), input: nil).output
        XCTAssertTrue(output.contains("\u{1B}[1;33mbob\u{1B}[0m https://x"), output)
        XCTAssertThrowsError(try Palette(changing: "peer=teal")) { XCTAssertTrue("\($0)".contains("unknown colour \"teal\"")) }
        XCTAssertThrowsError(try Palette(changing: "nick=red")) { XCTAssertTrue("\($0)".contains("tones: dim, bold, peer")) }
    }

    func testWideCharactersMoveTheCursorTwoColumns() {
        let screen = Screen(width: 40, height: 5, interactive: true, colors: false)
        XCTAssertTrue(screen.draw(InputLine(prompt: "> ", text: "日本", cursor: 2)).hasSuffix("\r\u{1B}[6C"))
    }
}
