import ArgumentParser
import Foundation
import SIMPCommandLine

/// Turns `--config FILE` and `SIMP_*` environment variables into arguments placed before the
/// typed ones (so typed options win, then the environment, then the file), then runs `simp-server`.
@main
enum SIMPServerMain {
    /// The relay's options (`simp-server --help`), read from the command's own definition, so
    /// each one is a key of a config file and a `SIMP_*` variable; the others are errors.
    static let relayOptions: CommandOptions = {
        do {
            return try CommandOptions(describing: Serve._dumpHelp(), excluding: ["config", "print-config", "help", "version"])
        } catch {
            fatalError("simp-server: cannot read its own options: \(error)")
        }
    }()

    /// The relay's options by long name; a key missing here is reported as unknown in a config file.
    static var relayKeys: ConfigFile.Keys { relayOptions.keys }

    /// Options whose values add up when repeated (`--port 7600 --port 443`): typed ones replace
    /// the environment's, which replace the file's.
    static var repeatable: Set<String> { relayOptions.repeatable }

    static func main() async {
        var arguments = Array(CommandLine.arguments.dropFirst())
        if arguments == ["--help"] || arguments == ["-h"] || arguments == ["help"] {
            print(SIMPServerCommand.helpWithRelayOptions)
            return
        }
        if let unknown = try? UnknownOption.first(
            in: arguments, description: SIMPServerCommand._dumpHelp(), defaultSubcommand: "serve")
        {
            printError("\(unknown.command): \(unknown)")
            exit(ExitCode.validationFailure.rawValue)
        }
        let informational = ["-h", "--help", "--version", "help"]
        if !arguments.contains(where: { informational.contains($0) || $0.hasPrefix("--generate-completion-script") }) {
            do { arguments = try configured(arguments) } catch { printError("simp-server: \(error)"); exit(1) }
        }
        if !["user", "sessions", "token"].contains(arguments.first ?? ""), arguments.contains("--print-config") {
            printSettings(arguments)
        }
        await SIMPServerCommand.main(arguments)
    }

    /// `--print-config`: prints the settings as a config file and exits, if `serve` accepts
    /// them (otherwise the command goes on to refuse them as a start would).
    private static func printSettings(_ arguments: [String]) {
        let options = arguments.first == "serve" ? Array(arguments.dropFirst()) : arguments
        guard (try? Serve.parse(options)) != nil else { return }
        print("# simp-server's settings: typed options, then SIMP_* variables, then the --config file, then defaults")
        print(relayOptions.settingsFile(for: options), terminator: "")
        exit(0)
    }

    /// `arguments` with the file's and the environment's settings inserted where the command's options start.
    static func configured(_ arguments: [String]) throws -> [String] {
        var keys = relayKeys
        var at = arguments.first == "serve" ? 1 : 0
        if arguments.first == "user" { // user add|remove|list|lock|unlock take only --redis
            keys = ["redis": .value]
            at = min(2, arguments.count)
        } else if arguments.first == "token" { // token keygen|issue read no settings
            return arguments
        } else if arguments.first == "sessions" { // sessions [list|end] take only --redis
            keys = ["redis": .value]
            at = arguments.count > 1 && ["list", "end"].contains(arguments[1]) ? 2 : 1
        }
        var fromFile: [String] = []
        if let path = configPath(arguments) {
            let entries = try ConfigFile.entries(path: path, keys: relayKeys) // every key is checked
            try check(entries, from: path)
            fromFile = entries.flatMap(\.arguments)
            if keys.count != relayKeys.count { fromFile = values(of: "--redis", in: fromFile) }
        }
        let fromEnvironment = ConfigFile.overridden(
            try ConfigFile.arguments(environment: ProcessInfo.processInfo.environment, keys: keys), by: arguments, repeatable: repeatable)
        let settings = ConfigFile.overridden(fromFile, by: fromEnvironment + arguments, repeatable: repeatable) + fromEnvironment
        var result = arguments
        result.insert(contentsOf: settings, at: at)
        return result
    }

    /// Parses the file's settings as `serve` would, so a value of the wrong type or out of
    /// range is blamed on the file and, when one key alone is refused, on that key (not on a
    /// flag nobody typed). Keys that only go wrong together are blamed on the file.
    private static func check(_ entries: [ConfigFile.Entry], from path: String) throws {
        do { _ = try Serve.parse(entries.flatMap(\.arguments)) } catch {
            for entry in entries {
                do { _ = try Serve.parse(entry.arguments) } catch {
                    throw ConfigFile.Failure("\(path): \"\(entry.key)\": \(Serve.message(for: error))")
                }
            }
            throw ConfigFile.Failure("\(path): \(Serve.message(for: error))")
        }
    }

    /// The value of `--config FILE` or `--config=FILE`.
    private static func configPath(_ arguments: [String]) -> String? {
        for (index, argument) in arguments.enumerated() {
            if argument == "--config", index + 1 < arguments.count { return arguments[index + 1] }
            if argument.hasPrefix("--config=") { return String(argument.dropFirst("--config=".count)) }
        }
        return nil
    }

    /// Only `option VALUE` from `arguments`.
    private static func values(of option: String, in arguments: [String]) -> [String] {
        arguments.indices.dropLast().filter { arguments[$0] == option }.flatMap { [option, arguments[$0 + 1]] }
    }
}
