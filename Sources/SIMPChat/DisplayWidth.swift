import CTerminalColumns

/// How many terminal columns text occupies, by the C library's `wcwidth(3)` (asked in a UTF-8
/// locale whatever the process's locale is, so `LANG=C` does not change it): East Asian wide
/// characters and emoji take two, combining marks and control characters none, everything else one.
public enum DisplayWidth {
    /// The columns `character` (one grapheme cluster) occupies: its first scalar's, since the
    /// marks and joiners after it draw over it; two for an emoji variation selector (U+FE0F
    /// turns a text symbol into a two-column emoji) and for a flag (a pair of regional
    /// indicators, which wcwidth counts one column each).
    public static func of(_ character: Character) -> Int {
        let scalars = character.unicodeScalars
        guard let first = scalars.first else { return 0 }
        if first.value < 0x20 || (0x7F..<0xA0).contains(first.value) { return 0 }
        if scalars.contains(where: { $0.value == 0xFE0F }) || regionalIndicators.contains(first.value) { return 2 }
        switch simp_terminal_columns(first.value) {
        case -2: return withoutUTF8Locale(first)
        case -1: return 1 // unassigned or private use: terminals draw a placeholder
        case let columns: return Int(columns)
        }
    }

    /// The columns `text` occupies.
    public static func of<Text: StringProtocol>(_ text: Text) -> Int {
        text.reduce(0) { $0 + of($1) }
    }

    /// REGIONAL INDICATOR SYMBOL LETTER A … Z: two make a flag.
    private static let regionalIndicators: ClosedRange<UInt32> = 0x1F1E6...0x1F1FF

    /// A rough answer on a system with no UTF-8 locale installed (wcwidth cannot tell there):
    /// marks none, emoji two, everything else one (East Asian wide characters then count one).
    private static func withoutUTF8Locale(_ scalar: Unicode.Scalar) -> Int {
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return 0
        default: return scalar.properties.isEmojiPresentation ? 2 : 1
        }
    }
}
