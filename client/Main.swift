import ArgumentParser
import Foundation
import SIMPClient
import SIMPCommandLine

/// Reads the config file (if any) into arguments placed before the typed ones, then runs `simp`.
@main
enum SIMPMain {
    /// Keys for every subcommand: the flags of `ConnectionOptions`.
    static let sharedKeys: ConfigFile.Keys = [
        "server": .value, "user": .value, "password-file": .value, "udp-port": .value, "log-level": .value,
        "device": .value,
    ]
    /// Keys of the `[chat]` table.
    static let chatKeys: ConfigFile.Keys = [
        "to": .value, "history-dir": .value,
        "color": .flag(ifTrue: nil, ifFalse: "--no-color"),
        "read-receipts": .flag(ifTrue: nil, ifFalse: "--no-read-receipts"),
        "bell": .flag(ifTrue: nil, ifFalse: "--no-bell"),
        "colors": .value,
    ]

    /// Parses one config key's arguments alone (with a stand-in `--user` when the key is not
    /// `user`) so a value of the wrong type or out of range is blamed on the file and the key,
    /// not on a flag nobody typed.
    private static func check(_ entry: ConfigFile.Entry, from path: String) {
        let user = entry.key == "user" ? [] : ["--user", "config-check"]
        do {
            if entry.key.hasPrefix("chat.") {
                _ = try Chat.parse(entry.arguments + user)
            } else {
                _ = try ConnectionOptions.parse(entry.arguments + user)
            }
        } catch {
            fail("simp: \(path): \"\(entry.key)\": \(SIMPCommand.message(for: error))")
        }
    }

    static func main() async {
        var arguments = Array(CommandLine.arguments.dropFirst())
        if let unknown = try? UnknownOption.first(in: arguments, description: SIMPCommand._dumpHelp()) {
            FileHandle.standardError.write(Data("\(unknown.command): \(unknown)\n".utf8))
            exit(ExitCode.validationFailure.rawValue)
        }
        if let subcommand = arguments.first, ["chat", "send", "listen"].contains(subcommand),
            let path = ConfigFile.clientPath()
        {
            do {
                let entries = try ConfigFile.entries(path: path, keys: sharedKeys, sections: ["chat": chatKeys], section: subcommand)
                for entry in entries { check(entry, from: path) }
                let settings = ConfigFile.overridden(entries.flatMap(\.arguments), by: arguments, repeatable: ["--server"])
                arguments.insert(contentsOf: settings, at: 1)
            } catch {
                fail("simp: \(error)")
            }
        }
        await SIMPCommand.main(arguments)
    }
}
