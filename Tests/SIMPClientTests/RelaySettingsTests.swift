import Foundation
import SIMPCommandLine
import SIMPTestSupport
import XCTest

/// `simp-server --help` promises that every option also works from a config file and from the
/// `SIMP_*` environment: each one is checked here, through `--print-config`, whatever options the
/// relay has (an option added later is covered without changing this test).
final class RelaySettingsTests: XCTestCase {
    var scratch: URL!

    override func setUp() async throws {
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("simp-settings-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    }

    override func tearDown() async throws {
        try? FileManager.default.removeItem(at: scratch)
    }

    func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> (status: Int32, out: String, err: String) {
        let child = try ChildProcess("simp-server", arguments, environment: environment)
        let status = await child.exitStatus(timeout: 30)
        if status == nil { child.signal(SIGKILL) }
        return (status ?? -1, child.standardOutput, child.standardError)
    }

    /// `--print-config`'s lines by key: `key = value` for a setting given, `#…` for a default.
    func settings(_ arguments: [String], environment: [String: String] = [:]) async throws -> [String: String]? {
        let printed = try await run(["--print-config"] + arguments, environment: environment)
        guard printed.status == 0 else { return nil }
        var lines: [String: String] = [:]
        for line in printed.out.split(separator: "\n").map(String.init) where !line.hasPrefix("# simp-server") {
            let body = line.hasPrefix("# ") ? String(line.dropFirst(2)) : line
            guard let key = body.split(separator: " ").first else { continue }
            lines[String(key)] = line
        }
        return lines
    }

    /// Options that are refused alone: each is given with the other.
    let together = ["tls-cert": "tls-key", "tls-key": "tls-cert"]

    /// A value `serve` accepts for `key` that differs from its default, typed, with the line it prints.
    func sample(_ key: String, defaultLine: String) async throws -> (value: String, line: String)? {
        var candidates: [String] = []
        if let range = defaultLine.range(of: " = "), defaultLine.hasSuffix(" (default)") {
            let text = String(defaultLine[range.upperBound...].dropLast(" (default)".count)).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            if let number = Int(text) { candidates.append(String(number + 1)) }
            if text.contains("."), let number = Double(text) { candidates.append(String(number + 0.5)) }
            candidates.append(text)
        }
        candidates += ["7", "relay-test", scratch.appendingPathComponent("\(key).pem").path]
        for value in candidates {
            let partner = together[key].map { ["--\($0)", scratch.appendingPathComponent("\($0).pem").path] } ?? []
            if let line = try await settings(["--\(key)", value] + partner)?[key], line.hasPrefix("\(key) = ") { return (value, line) }
        }
        return nil
    }

    func testEveryRelayOptionInHelpWorksFromTheConfigFileAndTheEnvironment() async throws {
        let help = try await run(["--help"])
        XCTAssertEqual(help.status, 0)
        var inHelp: Set<String> = []
        for line in help.out.split(separator: "\n") {
            let words = line.split(separator: " ")
            guard let option = words.first(where: { $0.hasPrefix("--") }), words.first == option || words.first?.hasSuffix(",") == true
            else { continue }
            inHelp.insert(String(option.dropFirst(2).prefix { $0 != "," && $0 != "=" && $0 != "<" }))
        }
        inHelp.subtract(["help", "version", "config", "print-config"])
        XCTAssertTrue(inHelp.isSuperset(of: ["port", "redis", "tls-cert", "tls-key", "no-login", "threads"]), "\(inHelp.sorted())")

        let printedDefaults = try await settings([])
        let defaults = try XCTUnwrap(printedDefaults, "simp-server --print-config fails")
        XCTAssertEqual(Set(defaults.keys), inHelp, "--print-config shows every option of --help")
        for (key, line) in defaults { XCTAssertTrue(line.hasPrefix("# "), "\(key) is set with nothing given: \(line)") }

        let file = scratch.appendingPathComponent("relay.toml")
        for key in inHelp.sorted() {
            let isFlag = defaults[key] == "# \(key) = false (default)"
            let value: String, typed: String
            if isFlag {
                (value, typed) = ("true", "\(key) = true")
                let line = try await settings(["--\(key)"])?[key]
                XCTAssertEqual(line, typed, "--\(key) typed")
            } else {
                guard let sample = try await sample(key, defaultLine: defaults[key] ?? "") else {
                    XCTFail("no value of --\(key) is accepted")
                    continue
                }
                (value, typed) = sample
            }
            var environment = [ConfigFile.environmentName(key): value]
            var toml = "\(key) = \(isFlag || Double(value) != nil ? value : "\"\(value)\"")\n"
            if let partner = together[key] {
                let path = scratch.appendingPathComponent("\(partner).pem").path
                environment[ConfigFile.environmentName(partner)] = path
                toml += "\(partner) = \"\(path)\"\n"
            }
            let fromEnvironment = try await settings([], environment: environment)
            XCTAssertEqual(fromEnvironment?[key], typed, "\(ConfigFile.environmentName(key))=\(value)")
            try toml.write(to: file, atomically: true, encoding: .utf8)
            let fromFile = try await settings(["--config", file.path])
            XCTAssertEqual(fromFile?[key], typed, "\(key) in --config: \(toml)")
        }
    }

    /// A TLS setting that is given but cannot be used stops the relay with the reason, whether it
    /// was typed, came from the environment or from the file; one without the other is refused.
    func testAnUnusableTLSSettingFromTheEnvironmentOrTheFileStopsTheRelay() async throws {
        let redis = try await RedisServerProcess.start()
        let missing = scratch.appendingPathComponent("nonexistent.pem").path
        let base = ["--port", "0", "--udp-port", "0", "--redis", redis.url.description]
        let fromEnvironment = try await run(base, environment: ["SIMP_TLS_CERT": missing, "SIMP_TLS_KEY": missing])
        XCTAssertEqual(fromEnvironment.status, 1, fromEnvironment.err)
        XCTAssertTrue(fromEnvironment.err.contains("cannot read the TLS certificate \(missing)"), fromEnvironment.err)

        let file = scratch.appendingPathComponent("relay.toml")
        try "tls-cert = \"\(missing)\"\ntls-key = \"\(missing)\"\n".write(to: file, atomically: true, encoding: .utf8)
        let fromFile = try await run(base + ["--config", file.path])
        XCTAssertEqual(fromFile.status, 1, fromFile.err)
        XCTAssertTrue(fromFile.err.contains("cannot read the TLS certificate \(missing)"), fromFile.err)

        let alone = try await run(base, environment: ["SIMP_TLS_CERT": missing])
        XCTAssertNotEqual(alone.status, 0)
        XCTAssertTrue(alone.err.contains("--tls-cert and --tls-key go together"), alone.err)
        await redis.stop()
    }
}
