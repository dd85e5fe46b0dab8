import Foundation
import SIMPLab

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
