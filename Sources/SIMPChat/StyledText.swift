/// A colour role for part of a line; the renderer maps it to ANSI SGR codes or to nothing.
public enum Tone: Sendable, Equatable {
    case plain, dim, bold, peer, me, success, warning, failure, link

    var sgr: String {
        switch self {
        case .plain: return ""
        case .dim: return "2"
        case .bold: return "1"
        case .peer: return "1;36"
        case .me: return "1;35"
        case .success: return "32"
        case .warning: return "33"
        case .failure: return "31"
        case .link: return "4;34"
        }
    }
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

    /// The text with ANSI colours when `colors` is true, plain otherwise.
    public func rendered(colors: Bool) -> String {
        guard colors else { return plain }
        return runs.map { run in
            run.tone == .plain ? run.text : "\u{1B}[\(run.tone.sgr)m\(run.text)\u{1B}[0m"
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
