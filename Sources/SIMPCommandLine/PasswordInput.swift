import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Where a command-line tool takes a password from: a file named by a flag, else the
/// `SIMP_PASSWORD` environment variable, else (when the relay asks for one and standard input
/// is a terminal) a prompt without echo. Scripts use the file or the variable; nothing is ever
/// taken from the command line itself, where other users could read it in the process list.
public enum PasswordInput {
    /// The environment variable scripts set.
    public static let environmentVariable = "SIMP_PASSWORD"

    /// Why no password could be read.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The password from `file` (`-` is standard input; a pipe such as `<(pass show simp)` or
    /// `/dev/stdin` works too) or the environment; nil when neither gives one.
    public static func read(file: String?, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> String? {
        if let file {
            // Read as a stream, not by the file's size: a pipe has none.
            guard let handle = file == "-" ? FileHandle.standardInput : FileHandle(forReadingAtPath: file),
                let data = try? handle.readToEnd()
            else {
                throw Failure(description: "cannot read the password file \(file)")
            }
            return try nonEmpty(firstLine(String(decoding: data, as: UTF8.self)), from: file == "-" ? "standard input" : file)
        }
        guard let value = environment[environmentVariable] else { return nil }
        return try nonEmpty(value, from: environmentVariable)
    }

    /// Asks on the terminal without echo; nil when standard input is not a terminal.
    public static func prompt(_ prompt: String) throws -> String? {
        guard isatty(STDIN_FILENO) == 1, let line = getpass(prompt) else { return nil }
        return try nonEmpty(String(cString: line), from: "the prompt")
    }

    /// The first line of `text`, without its line break.
    public static func firstLine(_ text: String) -> String {
        String(text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
            .trimmingCharacters(in: CharacterSet(charactersIn: "\r"))
    }

    private static func nonEmpty(_ password: String, from source: String) throws -> String {
        guard !password.isEmpty else { throw Failure(description: "the password from \(source) is empty") }
        return password
    }
}
