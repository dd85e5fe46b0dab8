import Foundation
import SIMPTestSupport
import XCTest

@testable import SIMPCommandLine

/// A mistyped option is named, with the option meant, before any other complaint (which the
/// typo would have caused): swift-argument-parser alone says "give either --to USER or --room
/// ROOM" for `simp send --too bob hi`.
final class UnknownOptionTests: XCTestCase {
    func run(_ executable: String, _ arguments: [String]) async throws -> (status: Int32, err: String) {
        let child = try ChildProcess(executable, arguments)
        let status = await child.exitStatus()
        return (status ?? -1, child.standardError)
    }

    func testATypoIsNamedWithTheOptionMeantBeforeAnyOtherError() async throws {
        for (executable, arguments, expected) in [
            ("simp", ["send", "--too", "bob", "hi"], "simp send: unknown option --too; did you mean --to?"),
            ("simp", ["send", "--user", "alice", "--tooo", "bob", "hi"], "simp send: unknown option --tooo; did you mean --to?"),
            ("simp", ["listen", "--usr", "alice"], "simp listen: unknown option --usr; did you mean --user?"),
            ("simp", ["chat", "--user", "alice", "--no-colour"], "simp chat: unknown option --no-colour; did you mean --no-color?"),
            ("simp", ["--bogus"], "simp: unknown option --bogus (simp --help lists the options)"),
            ("simp-server", ["--prot", "7600"], "simp-server: unknown option --prot; did you mean --port?"),
            ("simp-server", ["serve", "--tls-crt", "a", "--tls-key", "b"], "simp-server serve: unknown option --tls-crt; did you mean --tls-cert?"),
            ("simp-server", ["user", "add", "bob", "--redsi", "x"], "simp-server user add: unknown option --redsi; did you mean --redis?"),
        ] {
            let result = try await run(executable, arguments)
            XCTAssertEqual(result.status, 64, "\(executable) \(arguments): \(result.err)")
            XCTAssertEqual(result.err, expected + "\n", "\(executable) \(arguments)")
        }
        // After `--`, and as an option's value, a word is not an option.
        let afterTerminator = try await run("simp", ["send", "--user", "alice", "--to", "bob", "--server", "127.0.0.1:1", "--", "--too"])
        XCTAssertFalse(afterTerminator.err.contains("unknown option"), afterTerminator.err)
    }

    /// Every subcommand of `simp` (as the parser describes them, down to the ones that run:
    /// `simp devices approve`, not `simp devices`) gets the check.
    func testEverySubcommandOfSimpNamesAnUnknownOption() async throws {
        let child = try ChildProcess("simp", ["--experimental-dump-help"])
        _ = await child.exitStatus()
        let tool = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(child.standardOutput.utf8)) as? [String: Any])
        func leaves(of command: [String: Any], path: [String]) -> [[String]] {
            let children = command["subcommands"] as? [[String: Any]] ?? []
            guard !children.isEmpty else { return [path] }
            return children.flatMap { child -> [[String]] in
                guard let name = child["commandName"] as? String, name != "help" else { return [] }
                return leaves(of: child, path: path + [name])
            }
        }
        let subcommands = leaves(of: try XCTUnwrap(tool["command"] as? [String: Any]), path: [])
        XCTAssertTrue(Set(subcommands.map { $0[0] }).isSuperset(of: ["chat", "send", "listen", "keys", "devices"]), "\(subcommands)")
        for subcommand in subcommands {
            let result = try await run("simp", subcommand + ["--user", "alice", "--serverr", "x"])
            let name = subcommand.joined(separator: " ")
            XCTAssertEqual(result.err, "simp \(name): unknown option --serverr; did you mean --server?\n", name)
        }
    }

    func testTheNearestOptionIsSuggestedOnlyWhenItIsClose() {
        let known: Set<String> = ["--to", "--room", "--user", "--server", "--help", "-h"]
        XCTAssertEqual(UnknownOption.closest(to: "--too", among: known), "--to")
        XCTAssertEqual(UnknownOption.closest(to: "--tooo", among: known), "--to")
        XCTAssertEqual(UnknownOption.closest(to: "--sever", among: known), "--server")
        XCTAssertNil(UnknownOption.closest(to: "--xyz", among: known))
    }
}
