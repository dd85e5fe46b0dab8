/// A small terminal emulator for tests: interprets the output `simp chat` writes (text, CR,
/// LF (as CR LF, like a terminal's output processing), cursor up/down/forward, erase line, clear screen; colours are ignored) into rows of
/// text, so a test can check what a user would see.
public struct VirtualTerminal: Sendable {
    /// The terminal's width in columns.
    public let width: Int
    /// The terminal's height in rows.
    public let height: Int
    /// The visible rows, top first.
    public private(set) var rows: [[Character]]
    /// Lines that scrolled off the top.
    public private(set) var scrolledOff: [String] = []
    /// The cursor's row (0: the top).
    public private(set) var cursorRow = 0
    /// The cursor's column (0: the left edge).
    public private(set) var cursorColumn = 0
    private var pending: [Character] = []

    /// An empty screen of `width` × `height`, the cursor at the top left.
    public init(width: Int = 80, height: Int = 24) {
        self.width = width
        self.height = height
        rows = Array(repeating: [], count: height)
    }

    /// The visible rows as text, trailing spaces trimmed.
    public var lines: [String] {
        rows.map { String($0).replacingTrailingSpaces() }
    }

    /// The row the cursor is on.
    public var cursorLine: String { lines[cursorRow] }

    /// Every line written so far, scrolled off or visible (without trailing empty rows).
    public var transcript: [String] {
        var all = scrolledOff + lines
        while all.last == "" { all.removeLast() }
        return all
    }

    /// Interprets more output.
    public mutating func feed(_ text: String) {
        let characters = pending + Array(text)
        pending = []
        var index = 0
        while index < characters.count {
            let character = characters[index]
            if character == "\u{1B}" {
                guard let end = sequenceEnd(characters, from: index) else {
                    pending = Array(characters[index...])
                    return
                }
                apply(String(characters[index...end]))
                index = end + 1
                continue
            }
            switch character {
            case "\r": cursorColumn = 0
            case "\n", "\r\n": // a terminal's output processing turns LF into CR LF
                lineFeed()
                cursorColumn = 0
            default: put(character)
            }
            index += 1
        }
    }

    private func sequenceEnd(_ characters: [Character], from start: Int) -> Int? {
        guard start + 1 < characters.count else { return nil }
        guard characters[start + 1] == "[" else { return start + 1 }
        var index = start + 2
        while index < characters.count {
            if let ascii = characters[index].asciiValue, (0x40...0x7E).contains(ascii) { return index }
            index += 1
        }
        return nil
    }

    private mutating func apply(_ sequence: String) {
        guard sequence.hasPrefix("\u{1B}["), let final = sequence.last else { return }
        let parameter = Int(sequence.dropFirst(2).dropLast()) ?? 1
        switch final {
        case "A": cursorRow = max(0, cursorRow - parameter)
        case "B": cursorRow = min(height - 1, cursorRow + parameter)
        case "C": cursorColumn = min(width - 1, cursorColumn + parameter)
        case "D": cursorColumn = max(0, cursorColumn - parameter)
        case "K": if rows[cursorRow].count > cursorColumn { rows[cursorRow].removeSubrange(cursorColumn...) }
        case "J": rows = Array(repeating: [], count: height)
        case "H": (cursorRow, cursorColumn) = (0, 0)
        default: break // colours and anything else
        }
    }

    private mutating func put(_ character: Character) {
        if cursorColumn >= width {
            lineFeed()
            cursorColumn = 0
        }
        while rows[cursorRow].count < cursorColumn { rows[cursorRow].append(" ") }
        if cursorColumn < rows[cursorRow].count {
            rows[cursorRow][cursorColumn] = character
        } else {
            rows[cursorRow].append(character)
        }
        cursorColumn += 1
    }

    private mutating func lineFeed() {
        if cursorRow == height - 1 {
            scrolledOff.append(String(rows.removeFirst()).replacingTrailingSpaces())
            rows.append([])
        } else {
            cursorRow += 1
        }
    }
}

extension String {
    fileprivate func replacingTrailingSpaces() -> String {
        var text = self
        while text.last == " " { text.removeLast() }
        return text
    }
}
