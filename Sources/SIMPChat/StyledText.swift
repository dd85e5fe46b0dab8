/// A colour role for part of a line; the renderer maps it to ANSI SGR codes (`Palette`) or to nothing.
public enum Tone: String, Sendable, Equatable, CaseIterable {
    case plain, dim, bold, peer, me, success, warning, failure, link
}

/// A line of text made of styled runs.
public struct StyledText: Sendable, Equatable, ExpressibleByStringLiteral {
    public var runs: [(text: String, tone: Tone)]

    public init(_ text: String = "", _ tone: Tone = .plain) {
        runs = text.isEmpty ? [] : [(text, tone)]
    }

    public init(stringLiteral text: String) { self.init(text) }

    /// The text without styling.
    public var plain: String { runs.map(\.text).joined() }

    /// The terminal columns the text occupies.
    public var width: Int { DisplayWidth.of(plain) }

    /// The text with ANSI colours from `palette` when `colors` is true, plain otherwise.
    public func rendered(colors: Bool, palette: Palette = .standard) -> String {
        guard colors else { return plain }
        return runs.map { run in
            let code = palette.codes[run.tone] ?? ""
            return code.isEmpty ? run.text : "\u{1B}[\(code)m\(run.text)\u{1B}[0m"
        }.joined()
    }

    public static func + (left: StyledText, right: StyledText) -> StyledText {
        var joined = left
        joined.runs += right.runs
        return joined
    }

    public static func == (left: StyledText, right: StyledText) -> Bool {
        left.runs.count == right.runs.count
            && zip(left.runs, right.runs).allSatisfy { $0.text == $1.text && $0.tone == $1.tone }
    }
}

extension StyledText {
    /// The text cut into rows of at most `width` columns, breaking after the last space that
    /// fits (a word longer than a row is cut where the row ends). Always at least one row.
    public func wrapped(width: Int) -> [StyledText] {
        guard self.width > width else { return [self] }
        var rows: [[(Character, Tone)]] = [[]]
        var used = 0
        for run in runs {
            for character in run.text {
                let columns = DisplayWidth.of(character)
                if used + columns > width, !rows[rows.count - 1].isEmpty {
                    let current = rows[rows.count - 1]
                    if let space = current.lastIndex(where: { $0.0 == " " }), space > 0, character != " " {
                        rows[rows.count - 1] = Array(current[...space])
                        rows.append(Array(current[(space + 1)...]))
                    } else {
                        rows.append([])
                    }
                    used = DisplayWidth.of(String(rows[rows.count - 1].map(\.0)))
                }
                if character == " ", rows[rows.count - 1].isEmpty, rows.count > 1 { continue } // no leading space on a continuation
                rows[rows.count - 1].append((character, run.tone))
                used += columns
            }
        }
        return rows.map { row in
            row.reduce(into: StyledText()) { text, cell in
                if let last = text.runs.indices.last, text.runs[last].tone == cell.1 {
                    text.runs[last].text.append(cell.0)
                } else {
                    text.runs.append((String(cell.0), cell.1))
                }
            }
        }
    }
}
