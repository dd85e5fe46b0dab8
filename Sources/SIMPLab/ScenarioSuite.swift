import Foundation

/// The scenario files of a directory, in name order.
public struct ScenarioSuite {
    public struct Entry {
        public var file: URL
        public var scenario: Scenario
    }

    public let entries: [Entry]

    /// Loads every `*.json` in `directory`; a file that does not parse is a one-line error.
    public init(directory: URL) throws {
        let names: [String]
        do { names = try FileManager.default.contentsOfDirectory(atPath: directory.path) } catch {
            throw LabError("cannot list scenarios in \(directory.path): \(error.localizedDescription)")
        }
        entries = try names.filter { $0.hasSuffix(".json") }.sorted().map { name in
            let file = directory.appendingPathComponent(name)
            return Entry(file: file, scenario: try Scenario.load(from: file))
        }
    }
}
