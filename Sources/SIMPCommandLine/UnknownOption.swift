/// An option typed that the command does not have, found before the command checks anything
/// else: swift-argument-parser reports an unknown option only once the known ones make a valid
/// command, so `simp send --too bob hi` was told "give either --to USER or --room ROOM", which
/// hides the typo.
public struct UnknownOption: Sendable, Equatable, CustomStringConvertible {
    /// The command's path (`simp send`).
    public let command: String
    /// The option as typed, without a value (`--too`).
    public let typed: String
    /// The command's option most like it (`--to`), if one is close.
    public let suggestion: String?

    /// "unknown option --too; did you mean --to?"
    public var description: String {
        "unknown option \(typed)" + (suggestion.map { "; did you mean \($0)?" } ?? " (\(command) --help lists the options)")
    }

    /// The first option in `arguments` (as typed after the program's name, up to `--`) that the
    /// command they select does not know; `description` is the JSON of the root command's
    /// `_dumpHelp()`, and `defaultSubcommand` the subcommand that runs when none is named (the
    /// description does not say).
    public static func first(in arguments: [String], description: String, defaultSubcommand: String? = nil) throws -> UnknownOption? {
        var command = try CommandDescription(description).command
        var path = [command.commandName]
        var known = Set<String>()
        var atSubcommand = true
        for argument in arguments {
            if argument == "--" { break }
            if atSubcommand, !argument.hasPrefix("-") {
                if let subcommand = command.subcommands?.first(where: { $0.commandName == argument }) {
                    command = subcommand
                    path.append(argument)
                    continue
                }
            }
            if atSubcommand, path.count == 1, let name = defaultSubcommand,
                let subcommand = command.subcommands?.first(where: { $0.commandName == name })
            {
                command = subcommand // `simp-server --port 7600` is `simp-server serve --port 7600`
            }
            if atSubcommand {
                known = ["--experimental-dump-help", "--generate-completion-script"]
                for name in (command.arguments ?? []).flatMap({ $0.names ?? [] }) {
                    known.insert((name.kind == "short" ? "-" : "--") + name.name)
                }
            }
            atSubcommand = false
            guard argument.hasPrefix("--"), argument.count > 2 else { continue }
            let name = String(argument.prefix { $0 != "=" })
            if !known.contains(name) {
                return UnknownOption(command: path.joined(separator: " "), typed: name, suggestion: closest(to: name, among: known))
            }
        }
        return nil
    }

    /// The known long option nearest `name`, if it is a likely typo of it (one character wrong
    /// in a short name, two or about one in three in a longer one).
    static func closest(to name: String, among known: Set<String>) -> String? {
        let limit = name.count <= 5 ? 1 : max(2, (name.count - 2) / 3)
        var best: (option: String, distance: Int, shared: Int)?
        for option in known.sorted() where option.hasPrefix("--") {
            let distance = editDistance(option, name)
            let shared = zip(option, name).prefix { $0 == $1 }.count // a tie goes to the longer common start
            guard distance <= limit else { continue }
            if let best, (best.distance, -best.shared) <= (distance, -shared) { continue }
            best = (option, distance, shared)
        }
        return best?.option
    }

    /// Levenshtein distance: insertions, deletions and substitutions of one character.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1]
            for (j, y) in b.enumerated() {
                current.append(min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1)))
            }
            previous = current
        }
        return previous[b.count]
    }
}
