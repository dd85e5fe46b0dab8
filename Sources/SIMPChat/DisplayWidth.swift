/// How many terminal columns text occupies: East Asian wide characters and emoji take two,
/// combining marks and control characters none, everything else one.
public enum DisplayWidth {
    /// The columns `character` occupies.
    public static func of(_ character: Character) -> Int {
        let scalars = character.unicodeScalars
        guard let first = scalars.first else { return 0 }
        if first.value < 0x20 || (0x7F..<0xA0).contains(first.value) { return 0 }
        switch first.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return 0
        default: break
        }
        if isWide(first) || first.properties.isEmojiPresentation { return 2 }
        // An emoji variation selector (U+FE0F) turns a text symbol into a two-column emoji.
        if scalars.contains(where: { $0.value == 0xFE0F }) { return 2 }
        return 1
    }

    /// The columns `text` occupies.
    public static func of<Text: StringProtocol>(_ text: Text) -> Int {
        text.reduce(0) { $0 + of($1) }
    }

    /// East Asian Wide and Fullwidth ranges (Unicode TR 11), the common blocks.
    private static let wideRanges: [ClosedRange<UInt32>] = [
        0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF,
        0xA000...0xA4CF, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60,
        0xFFE0...0xFFE6, 0x1F300...0x1F64F, 0x1F900...0x1F9FF, 0x20000...0x3FFFD,
    ]

    private static func isWide(_ scalar: Unicode.Scalar) -> Bool {
        wideRanges.contains { $0.contains(scalar.value) }
    }
}
