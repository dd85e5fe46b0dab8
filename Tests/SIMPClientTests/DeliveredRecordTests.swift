import Foundation
import SIMPClient
import SIMPCore
import Synchronization
import XCTest

/// `simp listen`'s record of what it printed: kept across restarts, bounded, and what makes a
/// restarted listener skip (but receipt) copies of messages it printed before.
final class DeliveredRecordTests: XCTestCase {
    var home: URL!

    override func setUp() {
        home = FileManager.default.temporaryDirectory.appendingPathComponent("simp-record-\(UUID().uuidString)")
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: home)
    }

    private func message(_ id: UInt64, from sender: String = "alice", author: String = "") -> SIMPMessage {
        var message = SIMPMessage(kind: .text, messageId: id, fromUser: sender, toUser: "bob", content: "m\(id)")
        message.author = author
        return message
    }

    func testAddedKeysOutliveTheProcessInAPrivateFilePerUserAndDevice() throws {
        let record = try DeliveredRecord(home: home, user: "bob", device: "phone")
        try record.add(DeliveredKey(message(1)))
        try record.add(DeliveredKey(message(2, from: "#lobby", author: "carol")))
        try record.add(DeliveredKey(message(1))) // again: nothing new

        let reopened = try DeliveredRecord(home: home, user: "bob", device: "phone")
        XCTAssertEqual(reopened.url.path, home.appendingPathComponent("received/bob/phone.jsonl").path)
        XCTAssertEqual(reopened.count, 2)
        XCTAssertTrue(reopened.contains(DeliveredKey(message(1))))
        XCTAssertTrue(reopened.contains(DeliveredKey(message(2, from: "#lobby", author: "carol"))))
        XCTAssertFalse(reopened.contains(DeliveredKey(message(2, from: "#lobby", author: "dave"))), "another author's post")
        XCTAssertFalse(reopened.contains(DeliveredKey(message(1, from: "carol"))), "another sender's id")
        XCTAssertEqual(try String(contentsOf: reopened.url, encoding: .utf8).split(separator: "\n").count, 2)
        let permissions = try FileManager.default.attributesOfItem(atPath: reopened.url.path)[.posixPermissions] as? Int
        XCTAssertEqual(permissions, 0o600)
        XCTAssertEqual(try DeliveredRecord(home: home, user: "bob", device: "laptop").count, 0, "each device has its own")
    }

    func testALineCutOffByACrashIsSkippedAndTheNextOneStillCounts() throws {
        let record = try DeliveredRecord(home: home, user: "bob", device: "phone")
        try record.add(DeliveredKey(message(1)))
        let handle = try FileHandle(forWritingTo: record.url)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(#"{"a":"","f":"al"#.utf8)) // no newline: cut off
        try handle.close()

        let reopened = try DeliveredRecord(home: home, user: "bob", device: "phone")
        try reopened.add(DeliveredKey(message(2)))
        let again = try DeliveredRecord(home: home, user: "bob", device: "phone")
        XCTAssertTrue(again.contains(DeliveredKey(message(1))))
        XCTAssertTrue(again.contains(DeliveredKey(message(2))), "not glued to the cut-off line")
        XCTAssertEqual(again.count, 2)
    }

    func testTheNewestKeysOfEachSenderAreKeptAndTheFileIsCompacted() throws {
        let record = try DeliveredRecord(home: home, user: "bob", device: "phone", keepPerSender: 4)
        for id in 1...10 { try record.add(DeliveredKey(message(UInt64(id)))) }
        try record.add(DeliveredKey(message(1, from: "carol")))
        XCTAssertEqual(record.count, 5)
        XCTAssertFalse(record.contains(DeliveredKey(message(6))))
        XCTAssertTrue(record.contains(DeliveredKey(message(7))))
        XCTAssertTrue(record.contains(DeliveredKey(message(1, from: "carol"))), "other senders keep theirs")
        let lines = try String(contentsOf: record.url, encoding: .utf8).split(separator: "\n").count
        XCTAssertLessThan(lines, 11, "rewritten with the kept keys")

        let reopened = try DeliveredRecord(home: home, user: "bob", device: "phone", keepPerSender: 4)
        XCTAssertEqual((1...10).filter { reopened.contains(DeliveredKey(message(UInt64($0)))) }, [7, 8, 9, 10])
        XCTAssertTrue(reopened.contains(DeliveredKey(message(1, from: "carol"))))
    }

    /// A listener's printer adds each message right after printing it; the next run's printer
    /// skips what the first printed (its receipt is still sent by the client) and prints the rest.
    func testARestartedPrinterSkipsWhatTheEarlierRunPrinted() throws {
        let lines = Mutex<[String]>([])
        func printer(limit: Int? = nil) throws -> ListenService.Printer {
            ListenService.Printer(
                limit: limit, record: try DeliveredRecord(home: home, user: "bob", device: "phone"), format: { $0.content },
                printLine: { line in lines.withLock { $0.append(line) } })
        }
        let first = try printer()
        XCTAssertEqual([1, 2, 2, 3].map { first.print(message($0)) }, [true, true, false, true])
        let second = try printer(limit: 2)
        XCTAssertEqual(
            [2, 3, 4, 3, 5, 6].map { second.print(message($0)) }, [false, false, true, false, true, false],
            "copies are skipped and do not count towards the limit")
        XCTAssertEqual(lines.withLock { $0 }, ["m1", "m2", "m3", "m4", "m5"])
    }

    func testAPrinterWithoutARecordPrintsEachMessageItIsGiven() {
        let count = Mutex(0)
        let printer = ListenService.Printer(limit: nil, format: { $0.content }, printLine: { _ in count.withLock { $0 += 1 } })
        XCTAssertEqual([1, 1].map { printer.print(message($0)) }, [true, true], "the client's own window drops copies in one run")
        XCTAssertEqual(count.withLock { $0 }, 2)
    }
}
