import Foundation
import SIMPChat
import XCTest

final class HistoryStoreTests: XCTestCase {
    var directory: URL!

    override func setUp() {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-history-\(UUID().uuidString)")
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: directory)
    }

    func entry(_ id: UInt64, status: String? = nil) -> HistoryEntry {
        HistoryEntry(id: id, time: Int64(id), from: "alice", to: "bob", kind: "text", text: "message \(id)", status: status)
    }

    func testAppendedEntriesAndStatusUpdatesLoadInOrder() throws {
        let store = try HistoryStore(directory: directory, user: "alice")
        try store.append(entry(1, status: "sent"))
        try store.append(entry(2, status: "sent"))
        try store.update(id: 1, status: "delivered")
        try store.update(id: 2, status: "failed")

        let reopened = try HistoryStore(directory: directory, user: "alice")
        XCTAssertEqual(try reopened.load(), [entry(1, status: "delivered"), entry(2, status: "failed")])
        XCTAssertEqual(reopened.url.lastPathComponent, "alice.jsonl")
        let permissions = try FileManager.default.attributesOfItem(atPath: reopened.url.path)[.posixPermissions] as? Int
        XCTAssertEqual(permissions, 0o600)
    }

    /// A received file's entry learns later where the file was saved: the update names the
    /// sender, whose ids are not this user's.
    func testAReceivedFileSavedLaterIsFoldedIntoItsOwnEntry() throws {
        let store = try HistoryStore(directory: directory, user: "alice")
        func announced(_ id: UInt64, from sender: String) -> HistoryEntry {
            var entry = HistoryEntry(id: id, time: 1, from: sender, to: "alice", kind: "file", text: "[file] a.bin (2 bytes)")
            entry.file = HistoryFile(name: "a.bin", size: 2, sha256: "ab")
            return entry
        }
        try store.append(announced(5, from: "bob"))
        try store.append(announced(5, from: "carol"))
        try store.append(entry(5, status: "sent"))
        let saved = HistoryFile(name: "a (1).bin", size: 2, path: "/d/a (1).bin", sha256: "ab")
        try store.update(id: 5, from: "bob", file: saved)
        var bobs = announced(5, from: "bob")
        bobs.file = saved
        XCTAssertEqual(try store.load(), [bobs, announced(5, from: "carol"), entry(5, status: "sent")])
    }

    func testDamagedLinesAreSkipped() throws {
        let store = try HistoryStore(directory: directory, user: "alice")
        try store.append(entry(1))
        let handle = try FileHandle(forWritingTo: store.url)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("{not json\n".utf8))
        try handle.close()
        try store.append(entry(2))
        XCTAssertEqual(try store.load().map(\.id), [1, 2])
    }

    /// A history line torn by a full disk or a crash must not swallow the next one.
    func testALineAfterATornLastLineIsKept() throws {
        let store = try HistoryStore(directory: directory, user: "alice")
        try store.append(entry(1))
        let handle = try FileHandle(forWritingTo: store.url)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("{\"from\":\"alice\",\"id\":2,\"te".utf8)) // the write that ran out of space
        try handle.close()
        try store.append(entry(3))
        XCTAssertEqual(try store.load().map(\.id), [1, 3], "the torn line is skipped, the next one kept")
    }

    func testGrowingFileIsCompactedToTheNewestEntries() throws {
        let store = try HistoryStore(directory: directory, user: "alice", keep: 3)
        for id in 1...7 { try store.append(entry(UInt64(id))) }
        XCTAssertEqual(try store.load().map(\.id), [5, 6, 7])
        XCTAssertEqual(try HistoryStore(directory: directory, user: "alice", keep: 100).load().map(\.id), [5, 6, 7])
    }

    func testUserNamesCannotEscapeTheDirectory() throws {
        let store = try HistoryStore(directory: directory, user: "../evil/x")
        XCTAssertEqual(store.url.deletingLastPathComponent().path, directory.path)
        XCTAssertEqual(store.url.lastPathComponent, "_.._evil_x.jsonl")
    }

    func testDefaultDirectoryHonoursSIMPHome() {
        XCTAssertEqual(
            HistoryStore.defaultDirectory(environment: ["SIMP_HOME": "/data/simp", "HOME": "/home/a"]).path,
            "/data/simp/history")
        XCTAssertEqual(HistoryStore.defaultDirectory(environment: ["HOME": "/home/a"]).path, "/home/a/.simp/history")
    }
}
