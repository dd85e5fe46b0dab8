import Foundation
import SIMPTestSupport
import XCTest

/// `simp --help` names the config file's top-level keys: the file accepts exactly those, and
/// each is a flag of every subcommand (so `tls = true` or `ca = …` works like typing it).
final class ClientConfigKeysTests: XCTestCase {
    func testTheConfigKeysAreTheSharedFlagsHelpNames() async throws {
        let help = try ChildProcess("simp", ["--help"])
        _ = await help.exitStatus()
        let text = help.standardOutput.replacingOccurrences(of: "\n", with: " ")
        let start = try XCTUnwrap(text.range(of: "keys named like the shared flags ("))
        let list = text[start.upperBound...].prefix { $0 != ";" && $0 != ")" }
        let promised = Set(list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
        XCTAssertTrue(promised.isSuperset(of: ["server", "user", "tls", "ca", "no-e2e"]), "\(promised)")

        let home = FileManager.default.temporaryDirectory.appendingPathComponent("simp-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: home) }
        try "no-such-key = 1\n".write(to: home.appendingPathComponent("config.toml"), atomically: true, encoding: .utf8)
        let refused = try ChildProcess("simp", ["send", "--user", "x", "--to", "y", "hi"], environment: ["SIMP_HOME": home.path])
        _ = await refused.exitStatus()
        let known = try XCTUnwrap(refused.standardError.range(of: "(known: "), refused.standardError)
        let keys = Set(
            refused.standardError[known.upperBound...].prefix { $0 != ";" && $0 != ")" }.split(separator: ",")
                .map { $0.trimmingCharacters(in: .whitespaces) })
        XCTAssertEqual(keys, promised, "the file's keys are the ones --help names")

        for subcommand in ["chat", "send", "listen", "keys"] {
            let subcommandHelp = try ChildProcess("simp", [subcommand, "--help"])
            _ = await subcommandHelp.exitStatus()
            for key in keys { XCTAssertTrue(subcommandHelp.standardOutput.contains("--\(key)"), "simp \(subcommand) lacks --\(key)") }
        }
    }
}
