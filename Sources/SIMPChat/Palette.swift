/// The ANSI SGR codes each `Tone` is drawn with. `simp chat --colors peer=cyan,me=1;33`
/// (or `colors = "..."` in the config file's `[chat]` table) changes some of them.
public struct Palette: Sendable, Equatable {
    public var codes: [Tone: String]

    public static let standard = Palette(codes: [
        .plain: "", .dim: "2", .bold: "1", .peer: "1;36", .me: "1;35",
        .success: "32", .warning: "33", .failure: "31", .link: "4;34",
    ])

    /// Colour names a palette takes besides SGR codes.
    public static let names: [String: String] = [
        "black": "30", "red": "31", "green": "32", "yellow": "33", "blue": "34", "magenta": "35", "cyan": "36",
        "white": "37", "bold": "1", "dim": "2", "underline": "4", "none": "",
    ]

    public init(codes: [Tone: String]) { self.codes = codes }

    /// The standard palette with the changes in `text`: `TONE=COLOUR` pairs separated by commas,
    /// a colour being a name (`cyan`, `bold red` for several) or SGR codes (`1;36`).
    public init(changing text: String) throws {
        self = .standard
        for pair in text.split(separator: ",") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingWhitespace() }
            guard parts.count == 2, let tone = Tone(rawValue: parts[0]), tone != .plain else {
                throw PaletteError("\"\(pair)\" is not TONE=COLOUR (tones: \(Tone.allCases.dropFirst().map(\.rawValue).joined(separator: ", ")))")
            }
            var codes: [String] = []
            for word in parts[1].split(separator: " ").map(String.init) {
                if let code = Self.names[word] {
                    codes.append(code)
                } else if !word.isEmpty, word.allSatisfy({ $0.isNumber || $0 == ";" }) {
                    codes.append(word)
                } else {
                    throw PaletteError(
                        "unknown colour \"\(word)\" for \(tone.rawValue) (names: \(Self.names.keys.sorted().joined(separator: ", ")), or SGR codes like 1;36)"
                    )
                }
            }
            self.codes[tone] = codes.filter { !$0.isEmpty }.joined(separator: ";")
        }
    }
}

/// Why a palette could not be read.
public struct PaletteError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
