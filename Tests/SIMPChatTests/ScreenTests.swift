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
        let rewrite = screen.rewrite(row: row, old: "me: hi …", with: "me: hi ✓✓", input: input)
        XCTAssertNotNil(rewrite)
        terminal.feed(rewrite ?? "")
        XCTAssertEqual(terminal.transcript, ["me: hi ✓✓", "bob: yo", "bob> half typed"])

        for _ in 1...4 { terminal.feed(screen.print("more", input: input).output) }
        XCTAssertNil(screen.rewrite(row: row, old: "me: hi ✓✓", with: "me: hi ✗", input: input),
                     "scrolled off: the caller prints a follow-up line instead")
    }

    func testLongInputScrollsHorizontallyToKeepTheCursorVisible() {
        let screen = Screen(width: 20, height: 5, interactive: true, colors: false)
        var terminal = VirtualTerminal(width: 20, height: 5)
        let text = "abcdefghijklmnopqrstuvwxyz"
        terminal.feed(screen.draw(InputLine(prompt: "> ", text: text, cursor: text.count)))
        XCTAssertTrue(terminal.cursorLine.hasPrefix("> "))
        XCTAssertTrue(terminal.cursorLine.hasSuffix("xyz"), terminal.cursorLine)
        XCTAssertLessThan(terminal.cursorLine.count, 20)
        XCTAssertEqual(terminal.cursorColumn, terminal.cursorLine.count)
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

    func testWideCharactersMoveTheCursorTwoColumns() {
        let screen = Screen(width: 40, height: 5, interactive: true, colors: false)
        XCTAssertTrue(screen.draw(InputLine(prompt: "> ", text: "日本", cursor: 2)).hasSuffix("\r\u{1B}[6C"))
    }
}
