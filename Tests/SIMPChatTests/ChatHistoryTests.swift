import Foundation
import SIMPChat
import SIMPCore
import XCTest

/// `simp chat` records each incoming message in the history before its receipt, and after a
/// restart recognises a copy of one it has (neither stored nor shown again).
final class ChatHistoryTests: XCTestCase {
    var directory: URL!

    override func setUp() {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-chat-history-\(UUID().uuidString)")
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: directory)
    }

    private func message(_ id: UInt64, from sender: String = "bob", to receiver: String = "alice", author: String = "") -> SIMPMessage {
        var message = SIMPMessage(kind: .text, messageId: id, fromUser: sender, toUser: receiver, content: "m\(id)", time: 1)
        message.author = author
        return message
    }

    func testAnIncomingMessageIsStoredOnceAcrossRestarts() throws {
        let history = ChatHistory(directory: directory, user: "alice")
        XCTAssertTrue(history.recordIncoming(message(1)))
        XCTAssertFalse(history.recordIncoming(message(1)), "a copy in the same run")
        XCTAssertTrue(history.recordIncoming(message(2)))

        let restarted = ChatHistory(directory: directory, user: "alice")
        XCTAssertEqual(restarted.entries.map(\.id), [1, 2], "the history has them before any receipt")
        XCTAssertFalse(restarted.recordIncoming(message(2)), "delivered again after a restart: not new")
        XCTAssertTrue(restarted.recordIncoming(message(2, from: "carol")), "another sender's id 2 is another message")
        XCTAssertEqual(try HistoryStore(directory: directory, user: "alice").load().map(\.id), [1, 2, 2])
    }

    func testOwnMessagesAndRoomPostsByOthersAreNotMistakenForCopies() throws {
        let store = try HistoryStore(directory: directory, user: "alice")
        var sent = HistoryEntry(message(7, from: "alice", to: "alice"))
        sent.status = "sent" // alice wrote to herself: her own entry has a status
        try store.append(sent)
        let history = ChatHistory(directory: directory, user: "alice")
        XCTAssertTrue(history.recordIncoming(message(7, from: "alice", to: "alice")), "the copy she receives is new")
        XCTAssertTrue(history.recordIncoming(message(9, from: "#lobby", author: "bob")))
        XCTAssertTrue(history.recordIncoming(message(9, from: "#lobby", author: "carol")), "same id, another member's post")
        let restarted = ChatHistory(directory: directory, user: "alice")
        XCTAssertFalse(restarted.recordIncoming(message(9, from: "#lobby", author: "carol")))
        XCTAssertFalse(restarted.recordIncoming(message(7, from: "alice", to: "alice")))
    }

    /// A file's announcement is recorded as a file (name, size, digest), never with its key.
    func testAFileAnnouncementIsRecordedAsAFileWithoutItsKey() throws {
        var announcement = message(3)
        announcement.content = "a.bin"
        (announcement.fileId, announcement.fileSize, announcement.fileDigest) = (9, 2_000, [0x0F, 0xA0])
        announcement.fileKey = Array(repeating: 0x77, count: 32)
        announcement.e2ePayload = [1]
        let history = ChatHistory(directory: directory, user: "alice")
        XCTAssertTrue(history.recordIncoming(announcement))
        let entries = ChatHistory(directory: directory, user: "alice").entries
        XCTAssertEqual(entries.map(\.kind), ["file"])
        XCTAssertEqual(entries.first?.file, HistoryFile(name: "a.bin", size: 2_000, sha256: "0fa0"))
        let written = try String(contentsOf: try XCTUnwrap(history.store).url, encoding: .utf8)
        XCTAssertFalse(written.contains(Data(announcement.fileKey).base64EncodedString()), written)
        XCTAssertFalse(written.contains(String(repeating: "77", count: 32)), written)
    }

    func testWithoutAUsableDirectoryEveryMessageIsNewAndHistoryIsOff() throws {
        let file = directory.appendingPathComponent("not-a-directory")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try Data().write(to: file)
        let history = ChatHistory(directory: file, user: "alice")
        XCTAssertNil(history.store)
        XCTAssertTrue(history.recordIncoming(message(1)))
    }
}
