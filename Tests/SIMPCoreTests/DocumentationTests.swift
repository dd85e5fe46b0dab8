import Foundation
import XCTest

/// The documents and the comments must stand on their own and point at what exists: no tracker
/// issue numbers (a reader has no tracker: the text says what the software does), and every
/// section a reference names (`E2E.md §14.3`, `PROTOCOL §6.1`, a link's `#anchor`) is there.
final class DocumentationTests: XCTestCase {
    private static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// README.md, docs/ and the text shipped with the code (sources, scripts, tools, proto).
    private static func shippedTexts() throws -> [(path: String, text: String)] {
        var paths = ["README.md"]
        for folder in ["docs", "Sources", "scripts", "tools", "proto", "server", "client", "dist"] {
            guard let walk = FileManager.default.enumerator(atPath: root.appendingPathComponent(folder).path) else { continue }
            for case let path as String in walk
            where !path.hasPrefix(".") && ["md", "swift", "c", "h", "py", "proto", ""].contains((path as NSString).pathExtension) {
                paths.append(folder + "/" + path)
            }
        }
        return paths.compactMap { path in
            var isFolder: ObjCBool = false
            let url = root.appendingPathComponent(path)
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isFolder), !isFolder.boolValue,
                let text = try? String(contentsOf: url, encoding: .utf8)
            else { return nil }
            return (path, text)
        }
    }

    func testNoDocumentOrCommentNamesATrackerIssue() throws {
        let issue = try NSRegularExpression(pattern: #"\b[Ii]ssues? [0-9]+\b"#)
        var found: [String] = []
        for (path, text) in try Self.shippedTexts() {
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let line = String(line)
                if issue.firstMatch(in: line, range: NSRange(line.startIndex..., in: line)) != nil { found.append("\(path):\(number + 1): \(line)") }
            }
        }
        XCTAssertEqual(found, [], "say what the software does instead")
    }

    /// `E2E.md §14.3`, `docs/PROTOCOL.md §6.1`, `OPERATIONS §11`: the section must exist.
    func testEverySectionAReferenceNamesExists() throws {
        var sections: [String: Set<String>] = [:]
        for name in ["PROTOCOL", "E2E", "OPERATIONS", "ARCHITECTURE", "PERFORMANCE", "SCENARIOS", "SECURITY", "USAGE"] {
            let text = try String(contentsOf: Self.root.appendingPathComponent("docs/\(name).md"), encoding: .utf8)
            sections[name] = Set(matches(#"(?m)^#{2,4} (\d+(?:\.\d+)*)[. ]"#, in: text).map { $0[1] })
        }
        var missing: [String] = []
        for (path, text) in try Self.shippedTexts() {
            for match in matches(
                #"\b(PROTOCOL|E2E|OPERATIONS|ARCHITECTURE|PERFORMANCE|SCENARIOS|SECURITY|USAGE)(?:\.md)?\]? §(\d+(?:\.\d+)*)"#, in: text)
            where !(sections[match[1]]?.contains(match[2]) ?? false) {
                missing.append("\(path): \(match[0])")
            }
        }
        XCTAssertEqual(missing, [])
    }

    /// `[text](E2E.md#13-the-envelope-of-a-direct-message)` and `[text](#44-ping-and-pong)` in
    /// README.md and docs/ lead to a heading (GitHub's anchors: lower case, punctuation dropped,
    /// spaces as hyphens).
    func testEveryLinkToASectionLeadsToAHeading() throws {
        var anchors: [String: Set<String>] = [:]
        for (path, text) in try Self.shippedTexts() where path.hasSuffix(".md") {
            anchors[(path as NSString).lastPathComponent] = Set(
                matches(#"(?m)^#{1,6} (.+)$"#, in: text).map { heading in
                    String(
                        heading[1].lowercased().unicodeScalars.filter {
                            CharacterSet.alphanumerics.contains($0) || $0 == " " || $0 == "-" || $0 == "_"
                        }
                    )
                    .replacingOccurrences(of: " ", with: "-")
                })
        }
        var broken: [String] = []
        for (path, text) in try Self.shippedTexts() where path.hasSuffix(".md") {
            for link in matches(#"\]\(([A-Za-z0-9_]*\.md)?#([^)\s]+)\)"#, in: text) {
                let file = link[1].isEmpty ? (path as NSString).lastPathComponent : link[1]
                if !(anchors[file]?.contains(link[2]) ?? false) { broken.append("\(path): \(link[0])") }
            }
        }
        XCTAssertEqual(broken, [])
    }

    /// Each match of `pattern` in `text`, as the whole match then its groups ("" for a group
    /// that took no part).
    private func matches(_ pattern: String, in text: String) -> [[String]] {
        guard let regex = try? NSRegularExpression(pattern: pattern) else { return [] }
        return regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).map { match in
            (0..<match.numberOfRanges).map { Range(match.range(at: $0), in: text).map { String(text[$0]) } ?? "" }
        }
    }
}
