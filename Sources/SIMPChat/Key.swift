/// One key press (or pasted run of text) from the terminal, as the line editor sees it.
public enum Key: Equatable, Sendable {
    /// Printable text: one typed character, or several when pasted.
    case text(String)
    case enter
    case backspace
    case delete
    case left, right, up, down
    case home, end
    /// PageUp / PageDown: scroll the session's scrollback.
    case pageUp, pageDown
    /// Ctrl-Left / Alt-B and Ctrl-Right / Alt-F.
    case wordLeft, wordRight
    /// Ctrl+letter (lowercase), e.g. `.control("a")` for Ctrl-A. Enter, Tab and Backspace
    /// have their own cases.
    case control(Character)
    case tab
    /// A lone Escape (no sequence followed in time).
    case escape
    /// An escape sequence this program does not use.
    case unknown
}
