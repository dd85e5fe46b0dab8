import Foundation
import SIMPCore
import XCTest

@testable import SIMPClient

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

    /// The `held-files/` records (a file the relay held whole, forwarded with FILE_GRANT) go
    /// once the relay's retention has surely passed (7 days, its default) or beyond 1,000, the
    /// oldest first; `FileSend` prunes them before it looks for one.
    func testHeldFileRecordsGoAfterTheRelaysRetentionOrBeyondTheCount() throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("simp-held-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        let now = Date()
        var paths: [URL] = []
        for (index, days) in [0.0, 1, 6.9, 7.1, 30].enumerated() {
            let path = OutgoingFileRecord.heldPath(home: home, user: "alice", digest: [UInt8(index)])
            try OutgoingFileRecord(fileId: UInt64(index + 1), key: Array(repeating: 1, count: 32), size: 10, chunkSize: 1100).write(to: path)
            try FileManager.default.setAttributes([.modificationDate: now.addingTimeInterval(-days * 86_400)], ofItemAtPath: path.path)
            paths.append(path)
        }
        XCTAssertEqual(OutgoingFileRecord.maxHeldAge, TimeInterval(HeldFileRetention.defaultSeconds))
        XCTAssertEqual(OutgoingFileRecord.pruneHeld(home: home, now: now), 2, "older than 7 days")
        XCTAssertEqual(paths.map { FileManager.default.fileExists(atPath: $0.path) }, [true, true, true, false, false])
        XCTAssertEqual(OutgoingFileRecord.pruneHeld(home: home, now: now, maxCount: 2), 1, "the oldest beyond the count")
        XCTAssertNotNil(OutgoingFileRecord.read(paths[0]))
        XCTAssertNil(OutgoingFileRecord.read(paths[2]))
    }
}
