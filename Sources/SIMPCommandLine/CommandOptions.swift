import Foundation

/// A command's options and flags as swift-argument-parser describes them (the JSON of
/// `ParsableArguments._dumpHelp()`, which `--experimental-dump-help` prints), so the keys a
/// config file and the `SIMP_*` environment accept are the command's own: an option added to
/// the command works from the file and the environment with no list to keep up to date.
public struct CommandOptions: Sendable {
    /// One option or flag, by its long name.
    public struct Option: Sendable, Equatable {
        /// The long name without `--` (`relay-id`).
        public let name: String
        /// A flag (`--no-login`) takes no value; its key takes `true` or `false`.
        public let isFlag: Bool
        /// The option may be given several times and its values add up (`--port 7600 --port 443`).
        public let isRepeating: Bool
        /// What the command uses when the option is not given, as `--help` shows it (nil: none).
        public let defaultValue: String?
        /// The flag's inverse (`--no-color` of `--color`), if it has one.
        public let inverse: String?
    }

    /// The options, in the order of `--help`.
    public let options: [Option]

    /// Reads `description` (the JSON of `_dumpHelp()`) and keeps the options and flags with a
    /// long name that are not `excluded` (`help`, `version` and the ones that are no setting,
    /// such as `config`).
    public init(describing description: String, excluding excluded: Set<String>) throws {
        options = (try CommandDescription(description).command.arguments ?? []).compactMap { argument in
            guard argument.kind != "positional" else { return nil }
            let longNames = (argument.names ?? []).filter { $0.kind == "long" }.map(\.name)
            guard let name = longNames.first, !excluded.contains(name) else { return nil }
            return Option(
                name: name, isFlag: argument.kind == "flag", isRepeating: argument.isRepeating ?? false,
                defaultValue: argument.defaultValue, inverse: longNames.dropFirst().first)
        }
    }

    /// The config keys: an option's value as `--name VALUE`, a flag's `true` as `--name` (and
    /// `false` as its inverse, if it has one).
    public var keys: ConfigFile.Keys {
        var keys: ConfigFile.Keys = [:]
        for option in options {
            keys[option.name] = option.isFlag ? .flag(ifTrue: "--" + option.name, ifFalse: option.inverse.map { "--" + $0 }) : .value
        }
        return keys
    }

    /// The options whose values add up, as typed (`--port`).
    public var repeatable: Set<String> { Set(options.filter(\.isRepeating).map { "--" + $0.name }) }

    /// The settings `arguments` give, as a config file: one `key = value` line per option in
    /// `--help`'s order, the last value of an option given more than once (all of them for a
    /// repeating one), and each option not given as a comment with its default.
    public func settingsFile(for arguments: [String]) -> String {
        var given: [String: [String]] = [:]
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            index += 1
            guard argument.hasPrefix("--") else { continue }
            let name = String(argument.dropFirst(2).prefix { $0 != "=" })
            if let option = options.first(where: { $0.name == name || $0.inverse == name }), option.isFlag {
                given[option.name] = [name == option.name ? "true" : "false"]
            } else if let option = options.first(where: { $0.name == name }) {
                let value: String
                if let equals = argument.firstIndex(of: "=") {
                    value = String(argument[argument.index(after: equals)...])
                } else if index < arguments.endIndex {
                    value = arguments[index]
                    index += 1
                } else {
                    continue
                }
                given[option.name] = option.isRepeating ? (given[option.name] ?? []) + [value] : [value]
            }
        }
        return options.map { option in
            if let values = given[option.name] {
                let shown = values.map { option.isFlag ? $0 : Self.tomlValue($0) }
                return "\(option.name) = " + (option.isRepeating ? "[" + shown.joined(separator: ", ") + "]" : shown[0])
            }
            if option.isFlag { return "# \(option.name) = false (default)" }
            if let defaultValue = option.defaultValue { return "# \(option.name) = \(Self.tomlValue(defaultValue)) (default)" }
            return "# \(option.name) is not set"
        }.joined(separator: "\n") + "\n"
    }

    /// A number as it is, anything else as a TOML string.
    static func tomlValue(_ text: String) -> String {
        if Int(text) != nil || (Double(text)?.isFinite == true && text.contains(".")) { return text }
        var escaped = ""
        for character in text.unicodeScalars {
            switch character {
            case "\"": escaped += "\\\""
            case "\\": escaped += "\\\\"
            case "\n": escaped += "\\n"
            case "\t": escaped += "\\t"
            default:
                if character.value < 0x20 || character.value == 0x7F {
                    escaped += String(format: "\\u%04X", character.value)
                } else {
                    escaped.unicodeScalars.append(character)
                }
            }
        }
        return "\"" + escaped + "\""
    }
}

/// The parts of swift-argument-parser's description of a command (`_dumpHelp()`) that
/// `CommandOptions` and `UnknownOption` read.
struct CommandDescription: Decodable {
    struct Command: Decodable {
        let commandName: String
        let arguments: [Argument]?
        let subcommands: [Command]?
    }
    struct Argument: Decodable {
        struct Name: Decodable {
            let kind: String
            let name: String
        }
        let kind: String
        let names: [Name]?
        let isRepeating: Bool?
        let defaultValue: String?
    }
    let command: Command

    init(_ json: String) throws { self = try JSONDecoder().decode(Self.self, from: Data(json.utf8)) }
}
