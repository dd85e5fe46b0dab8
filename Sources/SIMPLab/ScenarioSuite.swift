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
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw LabError("no scenario directory \(directory.relativePath) (--dir)")
        }
        let names: [String]
        do { names = try FileManager.default.contentsOfDirectory(atPath: directory.path) } catch {
            throw LabError("cannot list scenarios in \(directory.path): \(error.localizedDescription)")
        }
        entries = try names.filter { $0.hasSuffix(".json") }.sorted().map { name in
            let file = directory.appendingPathComponent(name)
            return Entry(file: file, scenario: try Scenario.load(from: file))
        }
    }

    /// A scenario file, or (when no such file exists) the scenario of that name in the suite at
    /// `directory`; neither is an error that lists the suite's names.
    public static func scenario(named name: String, directory: URL) throws -> Scenario {
        if FileManager.default.fileExists(atPath: name) { return try Scenario.load(from: URL(fileURLWithPath: name)) }
        let suite: ScenarioSuite
        do { suite = try ScenarioSuite(directory: directory) } catch {
            throw LabError("no scenario \"\(name)\": no such file, and \(error)")
        }
        if let entry = suite.entries.first(where: { $0.scenario.name == name }) { return entry.scenario }
        let names = suite.entries.map(\.scenario.name)
        throw LabError(
            "no scenario \"\(name)\": no such file, and none of that name in \(directory.relativePath)/; scenarios: "
                + names.joined(separator: ", "))
    }
}
