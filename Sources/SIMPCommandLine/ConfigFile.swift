import Foundation
import TOMLKit

/// Settings from a TOML file or the environment for a command whose flags take the same names,
/// turned into command-line arguments that go *before* the ones typed, so a typed flag
/// overrides them (the parser keeps the last value of an option).
///
/// A file has top-level keys (for every subcommand) and optional `[SECTION]` tables (for one
/// subcommand): `server = "relay:7600"`, `[chat]` `bell = false`. Unknown keys or sections and
/// values of the wrong type are errors that name the file and the key.
public enum ConfigFile {
    /// How a key becomes arguments.
    public enum Setting: Sendable {
        /// `key = "text"` or `key = 7` → `--key text`. A leading `~/` is the home directory.
        case value
        /// `key = true` / `false` → the flag for that value (nil: nothing).
        case flag(ifTrue: String?, ifFalse: String?)
    }

    /// The keys a command knows, by name.
    public typealias Keys = [String: Setting]

    /// Why a file could not be used.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    /// The arguments one key of a file gives, with the key as written (`chat.bell` in a table),
    /// so a value the command refuses can be blamed on the file and the key.
    public struct Entry: Sendable, Equatable {
        public let key: String
        public let arguments: [String]
    }

    /// The arguments the file at `path` gives: its top-level `keys`, and the keys of the table
    /// named `section` (one of `sections`; the others are checked but give nothing here).
    public static func arguments(path: String, keys: Keys, sections: [String: Keys] = [:], section: String? = nil) throws -> [String] {
        try entries(path: path, keys: keys, sections: sections, section: section).flatMap(\.arguments)
    }

    /// `arguments(path:keys:sections:section:)`, key by key.
    public static func entries(path: String, keys: Keys, sections: [String: Keys] = [:], section: String? = nil) throws -> [Entry] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { throw Failure("\(path): no such config file") }
        guard !isDirectory.boolValue else { throw Failure("\(path): is a directory, not a config file") }
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw Failure("\(path): cannot read the config file (\(error.localizedDescription))")
        }
        let table: TOMLTable
        do { table = try TOMLTable(string: text) } catch let error as TOMLParseError {
            throw Failure("\(path):\(error.source.begin.line): \(error.description)")
        }
        var entries: [Entry] = []
        for (key, value) in table {
            if let setting = keys[key] {
                entries.append(Entry(key: key, arguments: try self.arguments(key, value, setting, where: path)))
            } else if let sectionKeys = sections[key], let inner = value.table {
                for (innerKey, innerValue) in inner {
                    guard let setting = sectionKeys[innerKey] else {
                        throw Failure("\(path): unknown key \"\(innerKey)\" in [\(key)] (known: \(known(sectionKeys)))")
                    }
                    let name = "\(key).\(innerKey)"
                    let given = try self.arguments(name, innerValue, setting, where: path)
                    if key == section { entries.append(Entry(key: name, arguments: given)) }
                }
            } else {
                let tables = sections.isEmpty ? "" : "; tables: " + sections.keys.sorted().map { "[\($0)]" }.joined(separator: ", ")
                throw Failure("\(path): unknown key \"\(key)\" (known: \(known(keys))\(tables))")
            }
        }
        return entries
    }

    /// The arguments environment variables give: `SIMP_REDIS` for the key `redis`,
    /// `SIMP_MAX_FRAME_SIZE` for `max-frame-size`; flags take `true`/`false` (or 1/0).
    public static func arguments(environment: [String: String], keys: Keys) throws -> [String] {
        var arguments: [String] = []
        for key in keys.keys.sorted() {
            let name = environmentName(key)
            guard let text = environment[name], !text.isEmpty, let setting = keys[key] else { continue }
            switch setting {
            case .value: arguments += ["--\(key)", text]
            case .flag(let ifTrue, let ifFalse):
                switch text.lowercased() {
                case "1", "true", "yes": arguments += ifTrue.map { [$0] } ?? []
                case "0", "false", "no": arguments += ifFalse.map { [$0] } ?? []
                default: throw Failure("\(name) must be true or false, got \"\(text)\"")
                }
            }
        }
        return arguments
    }

    /// `SIMP_` and the key in capitals with `_` for `-`.
    public static func environmentName(_ key: String) -> String {
        "SIMP_" + key.uppercased().replacingOccurrences(of: "-", with: "_")
    }

    /// Where `simp` looks for its file: `$SIMP_HOME/config.toml`, else
    /// `$XDG_CONFIG_HOME/simp/config.toml` (default `~/.config`). Nil if it does not exist.
    public static func clientPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        var candidates: [String] = []
        if let home = environment["SIMP_HOME"], !home.isEmpty { candidates.append(home + "/config.toml") }
        let configHome =
            environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? (environment["HOME"] ?? NSHomeDirectory()) + "/.config"
        candidates.append(configHome + "/simp/config.toml")
        return candidates.first { FileManager.default.fileExists(atPath: $0) }
    }

    private static func arguments(_ name: String, _ value: TOMLValueConvertible, _ setting: Setting, where path: String) throws -> [String] {
        let flag = "--" + (name.split(separator: ".").last.map(String.init) ?? name)
        switch setting {
        case .value:
            if let list = value.array { // `port = [7600, 443]`: the option once per element
                return try list.flatMap { element in
                    guard element.array == nil else { throw Failure("\(path): \"\(name)\" must not nest lists, got \(value.debugDescription)") }
                    return try arguments(name, element, setting, where: path)
                }
            }
            if let text = value.string { return [flag, expandingHome(text)] }
            if let number = value.int { return [flag, String(number)] }
            if let number = value.double { return [flag, String(number)] }
            throw Failure("\(path): \"\(name)\" must be a string, a number or a list of them, got \(value.debugDescription)")
        case .flag(let ifTrue, let ifFalse):
            guard let on = value.bool else { throw Failure("\(path): \"\(name)\" must be true or false, got \(value.debugDescription)") }
            return (on ? ifTrue : ifFalse).map { [$0] } ?? []
        }
    }

    /// `settings` (arguments from a file or the environment) without the `repeatable` options
    /// that `typed` gives. The parser keeps the last value of an ordinary option, so a typed one
    /// wins by coming later; a repeatable option's values add up instead, so the typed ones
    /// must replace those of the file and the environment here.
    public static func overridden(_ settings: [String], by typed: [String], repeatable: Set<String>) -> [String] {
        let given = Set(typed.compactMap { argument in repeatable.first { argument == $0 || argument.hasPrefix($0 + "=") } })
        var kept: [String] = []
        var index = settings.startIndex
        while index < settings.endIndex {
            let argument = settings[index]
            if given.contains(argument) {
                index += 2 // the option and its value
                continue
            }
            if !given.contains(where: { argument.hasPrefix($0 + "=") }) { kept.append(argument) }
            index += 1
        }
        return kept
    }

    private static func known(_ keys: Keys) -> String { keys.keys.sorted().joined(separator: ", ") }

    /// `~` or a leading `~/` as the user's home: `$HOME` as the shell has it (under sudo or in
    /// a container the password database may name another directory), else the database's.
    static func expandingHome(_ text: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        guard text == "~" || text.hasPrefix("~/") else { return text }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return home + text.dropFirst()
    }
}
