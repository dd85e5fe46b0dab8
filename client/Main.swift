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

    static func main() async {
        var arguments = Array(CommandLine.arguments.dropFirst())
        if let subcommand = arguments.first, ["chat", "send", "listen"].contains(subcommand),
           let path = ConfigFile.clientPath() {
            do {
                let configured = try ConfigFile.arguments(path: path, keys: sharedKeys, sections: ["chat": chatKeys], section: subcommand)
                arguments.insert(contentsOf: configured, at: 1)
            } catch {
                fail("simp: \(error)")
            }
        }
        await SIMPCommand.main(arguments)
    }
}
