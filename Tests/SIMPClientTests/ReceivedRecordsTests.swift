import Foundation
import SIMPClient
import XCTest

/// The `.received/` records of files received are bounded: older than the age limit or beyond
/// the count limit (oldest first) they are removed; other files are left alone.
final class ReceivedRecordsTests: XCTestCase {
    func testOldRecordsAndTheOldestBeyondTheCountAreRemoved() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-received-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let now = Date()
        // Ages in days: 0 (newest) … 4, and one 100 days old.
        for (name, days) in [("a", 0.0), ("b", 1), ("c", 2), ("d", 3), ("e", 4), ("old", 100)] {
            let url = directory.appendingPathComponent(name + ".json")
            try Data("{}".utf8).write(to: url)
            try FileManager.default.setAttributes([.modificationDate: now.addingTimeInterval(-days * 86_400)], ofItemAtPath: url.path)
        }
        try Data("keep".utf8).write(to: directory.appendingPathComponent("notes.txt"))

        XCTAssertEqual(ReceivedRecords.prune(directory, now: now, maxAge: 90 * 86_400, maxCount: 3), 3)
        let left = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        XCTAssertEqual(left, ["a.json", "b.json", "c.json", "notes.txt"])
        XCTAssertEqual(ReceivedRecords.prune(directory, now: now), 0, "within the defaults")
    }
}
