import Foundation
import SIMPClient
import SIMPE2E
import XCTest

/// The device's end-to-end state on disk: private to the user, one file per name.
final class EndToEndStoreTests: XCTestCase {
    func testTheIdentityIsMadeOnceAndKeptInFilesOnlyTheUserCanRead() throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("simp-e2e-store-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        var random = SystemRandomNumberGenerator()
        let store = EndToEndFileStore(home: home, user: "alice", device: "desk")
        let first = try E2EMessenger(device: "desk", store: store, using: &random)
        try store.save("peer/bob/laptop", SecretBytes([1, 2, 3]))

        let again = try E2EMessenger(device: "desk", store: EndToEndFileStore(home: home, user: "alice", device: "desk"), using: &random)
        XCTAssertEqual(again.local.identity.publicKey, first.local.identity.publicKey, "made on first run, then loaded")
        XCTAssertEqual(try store.load("peer/bob/laptop"), [1, 2, 3])
        let files = try FileManager.default.contentsOfDirectory(atPath: store.directory.path).sorted()
        XCTAssertEqual(files, ["identity", "peer%2Fbob%2Flaptop", "prekeys"])
        for file in files {
            let mode = try FileManager.default.attributesOfItem(atPath: store.directory.appendingPathComponent(file).path)[.posixPermissions] as? Int
            XCTAssertEqual(mode, 0o600, file)
        }
        let directoryMode = try FileManager.default.attributesOfItem(atPath: store.directory.path)[.posixPermissions] as? Int
        XCTAssertEqual(directoryMode, 0o700)
    }

    /// A file copied back (from a backup, or from another machine) is told from the one the
    /// store wrote; what it holds reads the same, and the next save is the store's own again.
    func testAFileCopiedBackIsToldFromTheOneTheStoreWrote() throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("simp-e2e-store-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        let store = EndToEndFileStore(home: home, user: "alice", device: "desk")
        try store.save("peer/bob/laptop", SecretBytes([1, 2, 3]))
        XCTAssertFalse(try store.isCopy("peer/bob/laptop"))
        XCTAssertFalse(try store.isCopy("peer/nobody"))

        let file = store.directory.appendingPathComponent("peer%2Fbob%2Flaptop"), backup = home.appendingPathComponent("backup")
        try FileManager.default.copyItem(at: file, to: backup)
        try FileManager.default.removeItem(at: file)
        try FileManager.default.moveItem(at: backup, to: file) // the copy, made while the original was there
        XCTAssertTrue(try store.isCopy("peer/bob/laptop"))
        XCTAssertEqual(try store.load("peer/bob/laptop"), [1, 2, 3])

        try store.save("peer/bob/laptop", SecretBytes([4]))
        XCTAssertFalse(try store.isCopy("peer/bob/laptop"))
        XCTAssertEqual(try store.load("peer/bob/laptop"), [4])
    }

    /// Names become file names byte by byte: letters, digits and `._-` stay; every other byte,
    /// and a leading `.`, is written `%XX`, so no name escapes the directory or hides in it.
    func testNamesAreWrittenAsSafeFileNames() throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("simp-e2e-names-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        let store = EndToEndFileStore(home: home, user: "alice", device: "desk")
        let names = ["peer/bob/laptop", "../up", ".hidden", "room/#ops", "devices/zoë", "own-devices", "a b_c.d"]
        for (index, name) in names.enumerated() { try store.save(name, SecretBytes([UInt8(index)])) }
        let files = try FileManager.default.contentsOfDirectory(atPath: store.directory.path).sorted()
        XCTAssertEqual(
            files, ["%2E.%2Fup", "%2Ehidden", "a%20b_c.d", "devices%2Fzo%C3%AB", "own-devices", "peer%2Fbob%2Flaptop", "room%2F%23ops"])
        for (index, name) in names.enumerated() { XCTAssertEqual(try store.load(name), [UInt8(index)], name) }
    }
}
