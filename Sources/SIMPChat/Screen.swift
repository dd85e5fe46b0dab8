/// Turns chat output into terminal bytes.
///
/// Interactive (a terminal): the input line stays on the bottom row; a printed line clears
/// it, is written (wrapped at word boundaries), and the input line is drawn again below, so
/// output never mixes with what the user is typing. Every printed line is also kept in the
/// session's scrollback, so lines still on screen can be rewritten in place (a message's status
/// mark), PageUp/PageDown can page through it, and older history can be put above it. Plain
/// (not a terminal): one line per message, no escape sequences.
public struct Screen: Sendable {
    /// Terminal size in columns and rows.
    public private(set) var width: Int
    public private(set) var height: Int
    /// Whether there is an input line and cursor movement (a terminal on both ends).
    public let interactive: Bool
    /// Whether to emit ANSI colours.
    public let colors: Bool
    /// The colours of each tone.
    public var palette = Palette.standard
    /// The lines printed in this session (and older history put above them), oldest first.
    public private(set) var scrollback: [StyledText] = []
    /// The row number of `scrollback[0]`: a line's `Row` stays the same while lines are added
    /// below, put above, or trimmed off the top.
    private var firstRow = 0
    /// Lines of scrollback kept.
    public static let scrollbackLimit = 5000
    /// How many of the newest lines are below the view (PageUp); 0 when following new output.
    public private(set) var scrolledBack = 0
    /// A printed line's number, for rewriting it.
    public typealias Row = Int

    public init(width: Int = 80, height: Int = 24, interactive: Bool, colors: Bool) {
        self.width = max(width, 10)
        self.height = max(height, 2)
        self.interactive = interactive
        self.colors = colors && interactive
    }

    /// Bytes that print `line` above the input line and redraw the input line; also returns
    /// the row the line went to. While scrolled back the view stays put (the input line's
    /// marker counts the lines below).
    public mutating func print(_ line: StyledText, input: InputLine?) -> (output: String, row: Row) {
        let row = firstRow + scrollback.count
        scrollback.append(line)
        if scrollback.count > Self.scrollbackLimit {
            scrollback.removeFirst()
            firstRow += 1
        }
        guard interactive else { return (line.plain + "\n", row) }
        if scrolledBack > 0 {
            scrolledBack += 1
            return (draw(input), row)
        }
        return ("\r\u{1B}[2K" + rendered(line) + "\r\n" + draw(input), row)
    }

    /// Replaces the line printed at `row` with `line` in the scrollback, and returns the bytes
    /// that rewrite it on screen, or nil when that cannot be done (plain output, or scrolled
    /// off): the caller may print a follow-up. A line on screen whose new version takes another
    /// number of rows (a file's progress mark growing, then ✓✓) moves the lines above it: the
    /// screen is drawn again, so it never disagrees with the scrollback about where lines are.
    public mutating func rewrite(row: Row, with line: StyledText, input: InputLine?) -> String? {
        let index = row - firstRow
        guard scrollback.indices.contains(index) else { return nil }
        let old = scrollback[index]
        scrollback[index] = line
        guard interactive else { return nil }
        if scrolledBack > 0 { return view.contains(index) ? redraw(input) : nil }
        let below = rows(of: scrollback[(index + 1)...], upTo: height)
        let wrapped = line.wrapped(width: width)
        guard rows(of: old) == wrapped.count else { return below < height - 1 ? redraw(input) : nil }
        let up = below + wrapped.count
        guard up <= height - 1 else { return nil }
        let down = up - wrapped.count + 1 // from the line's last row to the input line
        return "\r\u{1B}[\(up)A" + wrapped.map { "\u{1B}[2K" + paint($0) }.joined(separator: "\r\n")
            + "\r\u{1B}[\(down)B" + draw(input)
    }

    /// Bytes that redraw the input line (prompt, the visible part of the text, cursor). Text
    /// scrolled out of view on either side is marked with `…`; while the view is scrolled back,
    /// the prompt starts with how many lines are below.
    public func draw(_ input: InputLine?) -> String {
        guard interactive, let input else { return "" }
        var prompt = input.prompt
        if scrolledBack > 0 { prompt = StyledText("[\(scrolledBack) more ↓] ", .warning) + prompt }
        let promptWidth = prompt.width
        let room = max(width - promptWidth - 1, 4)
        let characters = Array(input.text)
        let total = DisplayWidth.of(input.text)
        // Scroll horizontally just enough that the cursor stays on screen (with room for the markers).
        var start = 0
        if total > room {
            while DisplayWidth.of(String(characters[start..<input.cursor])) > room - 3 { start += 1 }
        }
        let hiddenBefore = start > 0
        var visible = ""
        var used = hiddenBefore ? 1 : 0
        var end = start
        for character in characters[start...] {
            let columns = DisplayWidth.of(character)
            let reserve = end + 1 < characters.count ? 1 : 0 // a `…` if more follows
            if used + columns + reserve > room { break }
            visible.append(character)
            used += columns
            end += 1
        }
        let marked =
            StyledText(hiddenBefore ? "…" : "", .dim) + StyledText(visible)
            + StyledText(end < characters.count ? "…" : "", .dim)
        let column = promptWidth + (hiddenBefore ? 1 : 0) + DisplayWidth.of(String(characters[start..<input.cursor]))
        return "\r\u{1B}[2K" + paint(prompt) + paint(marked)
            + "\r" + (column > 0 ? "\u{1B}[\(column)C" : "")
    }

    /// A new terminal size: the screen is redrawn from the scrollback (lines reflow).
    public mutating func resize(width: Int, height: Int, input: InputLine?) -> String {
        self.width = max(width, 10)
        self.height = max(height, 2)
        return redraw(input)
    }

    /// Bytes that clear the screen and draw the current view of the scrollback and the input line.
    public func redraw(_ input: InputLine?) -> String {
        guard interactive else { return "" }
        let shown = view
        let used = rows(of: scrollback[shown])
        var output = "\u{1B}[2J\u{1B}[H" + String(repeating: "\r\n", count: max(0, height - 1 - used))
        for line in scrollback[shown] { output += rendered(line) + "\r\n" }
        return output + draw(input)
    }

    /// PageUp: the view moves a page back in the scrollback.
    public mutating func pageUp(_ input: InputLine?) -> String {
        guard interactive else { return "" }
        scrolledBack = min(scrolledBack + page, max(0, scrollback.count - fittingFromTop))
        return redraw(input)
    }

    /// PageDown: the view moves a page forward; at the end it follows new output again.
    public mutating func pageDown(_ input: InputLine?) -> String {
        guard interactive, scrolledBack > 0 else { return "" }
        scrolledBack = max(0, scrolledBack - page)
        return redraw(input)
    }

    /// Back to following new output (e.g. when the user sends something).
    public mutating func follow(_ input: InputLine?) -> String {
        guard scrolledBack > 0 else { return "" }
        scrolledBack = 0
        return redraw(input)
    }

    /// Puts `line` into the scrollback above the line at `row` (that line and those below it
    /// move down a row: their `Row`s grow by one) and returns the bytes that redraw the view;
    /// nil when `row` is no longer kept (the caller prints the line instead). Plain output,
    /// which cannot go back, prints it.
    public mutating func insert(_ line: StyledText, before row: Row, input: InputLine?) -> String? {
        let index = row - firstRow
        guard scrollback.indices.contains(index) else { return nil }
        if index >= scrollback.count - scrolledBack { scrolledBack += 1 } // below the view: it stays put
        scrollback.insert(line, at: index)
        guard interactive else { return line.plain + "\n" }
        return redraw(input)
    }

    /// `/clear`: forgets the lines printed so far (they can no longer be rewritten: a later
    /// status change is printed as a line of its own) and leaves only the input line.
    public mutating func clear(_ input: InputLine?) -> String {
        firstRow += scrollback.count
        scrollback.removeAll()
        scrolledBack = 0
        return redraw(input)
    }

    /// Puts `lines` (older history, oldest first) above everything in the scrollback and
    /// shows them: the view goes back to the first of them; PageDown returns. Plain output
    /// prints them.
    public mutating func insertAbove(_ lines: [StyledText], input: InputLine?) -> String {
        guard interactive else { return lines.map { $0.plain + "\n" }.joined() }
        scrollback.insert(contentsOf: lines, at: 0)
        firstRow -= lines.count
        scrolledBack = max(0, scrollback.count - fittingFromTop)
        return redraw(input)
    }

    /// Lines PageUp/PageDown move by.
    private var page: Int { max(1, height - 2) }

    /// The indices of the scrollback lines in view: those ending `scrolledBack` lines before the
    /// newest, as many as fit above the input line.
    private var view: Range<Int> {
        let end = scrollback.count - scrolledBack
        var start = end
        var used = 0
        while start > 0, used + rows(of: scrollback[start - 1]) <= height - 1 {
            start -= 1
            used += rows(of: scrollback[start])
        }
        return start..<end
    }

    /// How many lines from the top of the scrollback fit above the input line.
    private var fittingFromTop: Int {
        var count = 0, used = 0
        while count < scrollback.count, used + rows(of: scrollback[count]) <= height - 1 {
            used += rows(of: scrollback[count])
            count += 1
        }
        return max(count, 1)
    }

    private func paint(_ text: StyledText) -> String { text.rendered(colors: colors, palette: palette) }

    private func rendered(_ line: StyledText) -> String {
        line.wrapped(width: width).map { paint($0) }.joined(separator: "\r\n")
    }

    private func rows(of line: StyledText) -> Int { line.wrapped(width: width).count }

    /// The rows `lines` take, counted up to `limit` (enough to know they do not fit).
    private func rows(of lines: ArraySlice<StyledText>, upTo limit: Int = .max) -> Int {
        var total = 0
        for line in lines.reversed() where total < limit { total += rows(of: line) }
        return total
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
