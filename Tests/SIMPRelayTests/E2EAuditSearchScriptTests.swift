import Foundation
import SIMPTestSupport
import XCTest

/// The search behind `scripts/e2e-audit` (`scripts/e2e-audit-search.py`) on files made here: a
/// text hidden as base64 at any alignment is a leak, a history without its text fails, and an
/// artefact without the control text fails, so a capture or core dump the search cannot see
/// into does not pass as clean.
final class E2EAuditSearchScriptTests: XCTestCase {
    private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    private var directory: URL!

    override func setUp() async throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("e2e-audit-search-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDown() async throws {
        try? FileManager.default.removeItem(at: directory)
    }

    let text = "vault code 4417", control = "audit123"

    func testACleanRunPasses() async throws {
        let secret = try file("secret", "RDB \(control) and ciphertext only")
        let history = try file("history", "{\"content\":\"\(text)\"}")
        let result = try await search(secrets: [secret], history: history)
        XCTAssertEqual(result.status, 0, result.output)
        XCTAssertTrue(result.output.contains("PASS"), result.output)
    }

    func testATextInBase64AtEveryAlignmentIsALeak() async throws {
        let history = try file("history", text)
        for prefix in ["", "x", "xy"] {
            let encoded = Data((prefix + text + "tail").utf8).base64EncodedString()
            let secret = try file("secret\(prefix.count)", "\(control) stored: \(encoded)")
            let result = try await search(secrets: [secret], history: history)
            XCTAssertEqual(result.status, 1, result.output)
            XCTAssertTrue(result.output.contains("LEAK (base64)"), "alignment \(prefix.count): \(result.output)")
        }
    }

    func testAHistoryWithoutItsTextAndAnArtefactWithoutTheControlFail() async throws {
        let emptyCapture = try file("capture", "")
        let history = try file("history", "something else")
        let result = try await search(secrets: [emptyCapture], history: history)
        XCTAssertEqual(result.status, 1, result.output)
        XCTAssertTrue(result.output.contains("secret text is missing from history"), result.output)
        XCTAssertTrue(result.output.contains("control room name is missing from artefact 1"), result.output)
    }

    private func file(_ name: String, _ contents: String) throws -> URL {
        let url = directory.appendingPathComponent(name)
        try Data(contents.utf8).write(to: url)
        return url
    }

    private func search(secrets: [URL], history: URL) async throws -> (status: Int32, output: String) {
        var arguments = [root.appendingPathComponent("scripts/e2e-audit-search.py").path, "--text", "secret text=\(text)"]
        for (index, secret) in secrets.enumerated() { arguments += ["--secret", "artefact \(index + 1)=\(secret.path)"] }
        arguments += ["--history", "history=\(history.path)=1", "--control", "room name=\(control)"]
        return try await ToolProcess.outcome(URL(fileURLWithPath: "/usr/bin/env"), ["python3"] + arguments)
    }
}
