/// Tab completion of the word before the cursor, as irssi and weechat do it: `/commands` at
/// the start of a line, user names and `#rooms` everywhere else (after `@` too). A single
/// match is completed with a space after it; several are completed as far as they agree, and
/// listed when that adds nothing.
public enum Completion {
    /// What Tab did.
    public struct Outcome: Equatable, Sendable {
        public var text: String
        public var cursor: Int
        /// The matches to show (several, and the word could not be lengthened).
        public var listed: [String]

        public init(text: String, cursor: Int, listed: [String]) {
            self.text = text
            self.cursor = cursor
            self.listed = listed
        }
    }

    /// Completes the word before `cursor` in `text` from `names` (users and `#rooms`) and `commands`.
    public static func complete(text: String, cursor: Int, names: [String], commands: [String]) -> Outcome {
        let characters = Array(text)
        var start = cursor
        while start > 0, !characters[start - 1].isWhitespace { start -= 1 }
        var word = String(characters[start..<cursor])
        let unchanged = Outcome(text: text, cursor: cursor, listed: [])
        let sigil = word.hasPrefix("@") ? "@" : ""
        word = String(word.dropFirst(sigil.count))
        let pool = start == 0 && word.hasPrefix("/") ? commands : names
        guard !word.isEmpty || !sigil.isEmpty else { return unchanged }
        let matches = pool.filter { $0.hasPrefix(word) || ($0.hasPrefix("#") && $0.dropFirst().hasPrefix(word)) }.sorted()
        guard let first = matches.first else { return unchanged }
        let completed: String
        if matches.count == 1 {
            completed = first + " "
        } else {
            let common = matches.dropFirst().reduce(first) { String($0.commonPrefix(with: $1)) }
            guard common.count > word.count else { return Outcome(text: text, cursor: cursor, listed: matches) }
            completed = common
        }
        let before = String(characters[..<start]) + sigil + completed
        let after = String(characters[cursor...]).drop { $0 == " " && completed.hasSuffix(" ") }
        return Outcome(text: before + after, cursor: before.count, listed: [])
    }
}

extension ChatSession {
    /// Tab: completes the word before the cursor from the names and rooms seen in this session
    /// and the commands; lists the matches when they cannot be told apart yet.
    mutating func complete() {
        let outcome =
            listDirectory.flatMap { PathCompletion.complete(text: editor.text, cursor: editor.cursor, list: $0) }
            ?? Completion.complete(text: editor.text, cursor: editor.cursor, names: Array(knownNames), commands: ChatCommand.names)
        if !outcome.listed.isEmpty { notice(outcome.listed.joined(separator: "  "), .dim, prefix: "") }
        editor.setText(outcome.text, cursor: outcome.cursor)
        output += screen.draw(inputLine)
    }

    /// Remembers user and room names for completion (not this user's own).
    mutating func learnNames(_ names: String...) {
        for name in names where !name.isEmpty && name != user { knownNames.insert(name) }
    }
}

/// Tab after `/file ` or `/image `: the path typed so far (the rest of the line up to the
/// cursor, spaces included, as `/file` reads it) is completed from its directory's entries,
/// as a shell does: one match completes (a directory with `/` after it), several complete as
/// far as they agree or are listed. Hidden entries only when the name typed starts with `.`.
public enum PathCompletion {
    /// The outcome, or nil when the line is not a `/file` or `/image` path (names are completed
    /// then). `list` gives a directory's entries (as typed: `""` is the current directory, `~/`
    /// the home), directories ending in `/`; nil when it cannot be read.
    public static func complete(text: String, cursor: Int, list: (String) -> [String]?) -> Completion.Outcome? {
        let characters = Array(text)
        guard let space = characters.firstIndex(where: \.isWhitespace), cursor > space,
            ["/file", "/image", "/img"].contains(String(characters[..<space]).lowercased())
        else { return nil }
        var start = space
        while start < cursor, characters[start].isWhitespace { start += 1 }
        let typed = String(characters[start..<cursor])
        guard !typed.contains("://") else { return nil } // an image link
        let directory = typed.lastIndex(of: "/").map { String(typed[...$0]) } ?? ""
        let partial = String(typed.dropFirst(directory.count))
        let matches = (list(directory) ?? []).filter { $0.hasPrefix(partial) && (partial.hasPrefix(".") || !$0.hasPrefix(".")) }.sorted()
        let unchanged = Completion.Outcome(text: text, cursor: cursor, listed: [])
        guard let first = matches.first else { return unchanged }
        let common = matches.dropFirst().reduce(first) { String($0.commonPrefix(with: $1)) }
        guard common.count > partial.count else {
            return matches.count > 1 ? Completion.Outcome(text: text, cursor: cursor, listed: matches) : unchanged
        }
        let before = String(characters[..<start]) + directory + common
        return Completion.Outcome(text: before + String(characters[cursor...]), cursor: before.count, listed: [])
    }
}
