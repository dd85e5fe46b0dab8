/// Turns chat output into terminal bytes.
///
/// Interactive (a terminal): the input line stays on the bottom row; a printed line clears
/// it, is written, and the input line is drawn again below, so output never mixes with what
/// the user is typing. Lines still on screen can be rewritten in place (a message's status
/// mark). Plain (not a terminal): one line per message, no escape sequences.
public struct Screen: Sendable {
    /// Terminal size in columns and rows.
    public private(set) var width: Int
    public private(set) var height: Int
    /// Whether there is an input line and cursor movement (a terminal on both ends).
    public let interactive: Bool
    /// Whether to emit ANSI colours.
    public let colors: Bool
    /// Rows printed above the input line so far; a printed line's row is its value then.
    private var rowsPrinted = 0
    /// Rows each printed line starts at, for rewriting in place.
    public typealias Row = Int

    public init(width: Int = 80, height: Int = 24, interactive: Bool, colors: Bool) {
        self.width = max(width, 10)
        self.height = max(height, 2)
        self.interactive = interactive
        self.colors = colors && interactive
    }

    /// Bytes that print `line` above the input line and redraw the input line; also returns
    /// the row the line went to.
    public mutating func print(_ line: StyledText, input: InputLine?) -> (output: String, row: Row) {
        let row = rowsPrinted
        guard interactive else { return (line.plain + "\n", row) }
        rowsPrinted += rows(of: line)
        return ("\r\u{1B}[2K" + line.rendered(colors: colors) + "\r\n" + draw(input), row)
    }

    /// Bytes that replace the line printed at `row` with `line`, or nil when that is not
    /// possible (plain output, scrolled off screen, or either line wraps): print a follow-up.
    public func rewrite(row: Row, old: StyledText, with line: StyledText, input: InputLine?) -> String? {
        let up = rowsPrinted - row
        guard interactive, up >= 1, up <= height - 1, rows(of: old) == 1, rows(of: line) == 1 else { return nil }
        return "\r\u{1B}[\(up)A\u{1B}[2K" + line.rendered(colors: colors) + "\r\u{1B}[\(up)B" + draw(input)
    }

    /// Bytes that redraw the input line (prompt, the visible part of the text, cursor).
    public func draw(_ input: InputLine?) -> String {
        guard interactive, let input else { return "" }
        let promptWidth = input.prompt.width
        let room = max(width - promptWidth - 1, 4)
        let characters = Array(input.text)
        // Scroll horizontally just enough that the cursor stays on screen.
        var start = 0
        while DisplayWidth.of(String(characters[start..<input.cursor])) > room - 1 { start += 1 }
        var visible = ""
        var used = 0
        for character in characters[start...] {
            let columns = DisplayWidth.of(character)
            if used + columns > room { break }
            visible.append(character)
            used += columns
        }
        let column = promptWidth + DisplayWidth.of(String(characters[start..<input.cursor]))
        return "\r\u{1B}[2K" + input.prompt.rendered(colors: colors) + visible
            + "\r" + (column > 0 ? "\u{1B}[\(column)C" : "")
    }

    /// A new terminal size. Lines on screen may have reflowed, so none is rewritten in place
    /// any more.
    public mutating func resize(width: Int, height: Int) {
        self.width = max(width, 10)
        self.height = max(height, 2)
        rowsPrinted += self.height
    }

    private func rows(of line: StyledText) -> Int {
        max(1, (line.width + width - 1) / width)
    }
}

/// What the input line shows: the prompt and the editor's text and cursor.
public struct InputLine: Sendable, Equatable {
    public var prompt: StyledText
    public var text: String
    /// Characters before the cursor.
    public var cursor: Int

    public init(prompt: StyledText, text: String, cursor: Int) {
        self.prompt = prompt
        self.text = text
        self.cursor = cursor
    }
}
