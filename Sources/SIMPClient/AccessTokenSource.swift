import Foundation
import SIMPCore

/// Where a client gets its access token (docs/PROTOCOL.md §4.9): given once (`SIMP_TOKEN`), a
/// file read again at each renewal (`--token-file`), or a command run again at each renewal,
/// whose standard output is the token (`--token-command`, as credential helpers work).
public enum AccessTokenSource: Sendable, Equatable {
    case fixed(String)
    case file(String)
    case command(String)

    /// How it renews, for what the user is told when a token ran out.
    public var renewal: ClientSession.Stop.TokenRenewal {
        switch self {
        case .fixed: .none
        case .file: .file
        case .command: .command
        }
    }

    /// Whether asking again can give a newer token (a fixed one cannot be renewed).
    public var renews: Bool {
        if case .fixed = self { return false }
        return true
    }

    /// Why no token could be had; the text says what to fix. It never holds the token.
    public struct Failure: Error, CustomStringConvertible, Equatable {
        public var description: String
    }

    /// The token now (blocking: reads the file or runs the command; call it off the event loop).
    public func read() throws(Failure) -> String {
        let token: String
        switch self {
        case .fixed(let text):
            token = text
        case .file(let path):
            do { token = try String(contentsOfFile: path, encoding: .utf8) } catch {
                throw Failure(description: "cannot read the token file \(path): \(error.localizedDescription)")
            }
        case .command(let command):
            token = try Self.run(command)
        }
        let trimmed = token.split(whereSeparator: \.isNewline).first.map(String.init)?.trimmingCharacters(in: .whitespaces) ?? ""
        guard !trimmed.isEmpty else { throw Failure(description: "the access token from \(self.origin) is empty") }
        return trimmed
    }

    /// Where the token comes from, for messages.
    public var origin: String {
        switch self {
        case .fixed: return "SIMP_TOKEN"
        case .file(let path): return "--token-file \(path)"
        case .command(let command): return "--token-command \"\(command)\""
        }
    }

    /// Runs `command` with /bin/sh; its standard output is the token.
    private static func run(_ command: String) throws(Failure) -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        do { try process.run() } catch { throw Failure(description: "cannot run --token-command: \(error.localizedDescription)") }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        let said = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let why = said.trimmingCharacters(in: .whitespacesAndNewlines)
            throw Failure(description: "--token-command exited with status \(process.terminationStatus)\(why.isEmpty ? "" : ": \(why)")")
        }
        return String(decoding: data, as: UTF8.self)
    }
}
