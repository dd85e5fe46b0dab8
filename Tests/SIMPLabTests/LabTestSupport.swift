import Foundation
import SIMPLab
import XCTest

/// The repository's scenario suite, found relative to this file.
enum Suite {
    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("scenarios")

    static func scenario(_ name: String) throws -> Scenario {
        try Scenario.load(from: directory.appendingPathComponent("\(name).json"))
    }

    static func decode(_ json: String) throws -> Scenario {
        try JSONDecoder().decode(Scenario.self, from: Data(json.utf8))
    }
}

extension XCTestCase {
    /// The error `Scenario.load` gives for a file holding `json` (a test failure if none).
    func loadError(_ json: String, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("strict-\(UUID().uuidString).json")
        try Data(json.utf8).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        do {
            _ = try Scenario.load(from: url)
        } catch {
            let message = "\(error)"
            XCTAssertTrue(message.contains(url.lastPathComponent), "names the file: \(message)", file: file, line: line)
            return message
        }
        XCTFail("loaded without an error", file: file, line: line)
        return ""
    }
}
