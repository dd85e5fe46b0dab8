/// The input line: text, a cursor, and the history of submitted lines, edited the way
/// readline users expect. A pure state machine: keys in, outcome out.
///
/// | Key | Effect |
/// |-----|--------|
/// | ←/→, Home/End, Ctrl-A/E | move |
/// | Ctrl-←/→, Alt-B/F | move by word |
/// | Backspace, Delete, Ctrl-D (on text) | delete a character |
/// | Ctrl-U / Ctrl-K | delete to the start / end of the line |
/// | Ctrl-W, Alt-Backspace | delete the word before the cursor |
/// | ↑/↓ | older / newer submitted lines (the unfinished line is kept) |
/// | Ctrl-C | clear the line; on an empty line, quit |
/// | Ctrl-D on an empty line | end of input (quit) |
/// | Ctrl-L | redraw |
public struct LineEditor: Sendable, Equatable {
    /// What a key did.
    public enum Outcome: Equatable, Sendable {
        /// The line or cursor changed (or nothing did): redraw the input line.
        case edited
        /// Enter: the line was submitted and the editor cleared.
        case submitted(String)
        /// Ctrl-C on an empty line.
        case interrupted
        /// Ctrl-D on an empty line.
        case endOfInput
        /// Ctrl-L: redraw the whole screen.
        case redraw
    }

    /// The line being edited.
    public private(set) var text = ""
    /// The cursor as a count of characters (grapheme clusters) before it.
    public private(set) var cursor = 0
    /// Submitted lines, oldest first.
    public private(set) var history: [String] = []
    /// Lines kept in `history`.
    public var historyLimit = 500
    /// Index into `history` while browsing with ↑/↓; nil when editing a new line.
    private var browsing: Int?
    /// The unfinished line put aside while browsing.
    private var draft = ""

    public init(history: [String] = []) {
        self.history = history
    }

    /// Replaces the line (a completion); the cursor goes to `cursor`, clamped to the text.
    public mutating func setText(_ newText: String, cursor newCursor: Int) {
        text = newText
        cursor = max(0, min(newCursor, text.count))
        browsing = nil
    }

    /// The text before the cursor.
    public var textBeforeCursor: Substring { text.prefix(cursor) }

    /// Applies one key.
    public mutating func handle(_ key: Key) -> Outcome {
        switch key {
        case .text(let typed): insert(typed)
        case .enter: return submit()
        case .backspace, .control("h"): deleteBackward()
        case .delete: deleteForward()
        case .left, .control("b"): cursor = max(0, cursor - 1)
        case .right, .control("f"): cursor = min(text.count, cursor + 1)
        case .home, .control("a"): cursor = 0
        case .end, .control("e"): cursor = text.count
        case .wordLeft: cursor = wordStart(before: cursor)
        case .wordRight: cursor = wordEnd(after: cursor)
        case .up, .control("p"): browse(by: -1)
        case .down, .control("n"): browse(by: 1)
        case .control("u"): replace(0..<cursor, with: "")
        case .control("k"): replace(cursor..<text.count, with: "")
        case .control("w"): replace(wordStart(before: cursor)..<cursor, with: "")
        case .control("c"):
            if text.isEmpty { return .interrupted }
            clear()
        case .control("d"):
            if text.isEmpty { return .endOfInput }
            deleteForward()
        case .control("l"): return .redraw
        case .tab, .escape, .unknown, .control, .pageUp, .pageDown: break
        }
        return .edited
    }

    private mutating func insert(_ typed: String) {
        let clean = String(
            typed.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }
                .map(Character.init))
        replace(cursor..<cursor, with: clean)
    }

    private mutating func deleteBackward() {
        guard cursor > 0 else { return }
        replace((cursor - 1)..<cursor, with: "")
    }

    private mutating func deleteForward() {
        guard cursor < text.count else { return }
        replace(cursor..<(cursor + 1), with: "")
    }

    /// Replaces the characters in `range` and leaves the cursor after the replacement. A
    /// combining mark typed after a letter joins it, so the cursor is recounted.
    private mutating func replace(_ range: Range<Int>, with replacement: String) {
        let characters = Array(text)
        let before = String(characters[..<range.lowerBound]) + replacement
        text = before + String(characters[range.upperBound...])
        cursor = min(before.count, text.count)
        browsing = nil
    }

    private mutating func clear() {
        text = ""
        cursor = 0
        browsing = nil
    }

    private mutating func submit() -> Outcome {
        let line = text
        clear()
        draft = ""
        if line.contains(where: { !$0.isWhitespace }), history.last != line {
            history.append(line)
            if history.count > historyLimit { history.removeFirst(history.count - historyLimit) }
        }
        return .submitted(line)
    }

    private mutating func browse(by step: Int) {
        let current = browsing ?? history.count
        let target = current + step
        guard target >= 0, target <= history.count, target != current else { return }
        if browsing == nil { draft = text }
        text = target == history.count ? draft : history[target]
        browsing = target == history.count ? nil : target
        cursor = text.count
    }

    private func isWordCharacter(_ character: Character) -> Bool {
        !(character.isWhitespace || character.isPunctuation)
    }

    private func wordStart(before position: Int) -> Int {
        let characters = Array(text)
        var index = position
        while index > 0, !isWordCharacter(characters[index - 1]) { index -= 1 }
        while index > 0, isWordCharacter(characters[index - 1]) { index -= 1 }
        return index
    }

    private func wordEnd(after position: Int) -> Int {
        let characters = Array(text)
        var index = position
        while index < characters.count, !isWordCharacter(characters[index]) { index += 1 }
        while index < characters.count, isWordCharacter(characters[index]) { index += 1 }
        return index
    }
}
