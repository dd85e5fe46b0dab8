import Foundation
import SIMPClient
import SIMPCore
import XCTest

/// How `simp listen` and `simp send --file --wait-received` print the relay's news that a held
/// file reached its receiver (docs/PROTOCOL.md §5.7).
final class FileReceivedNewsTests: XCTestCase {
    func testTheLineAndTheJSONEventNameTheFileTheReceiverAndItsDevice() throws {
        let news = FileReceivedNews(fileId: 42, receiver: "bob", device: "phone", name: "report.pdf")
        XCTAssertEqual(news.line, "✓✓ file report.pdf (id 42) reached bob's device phone: whole, its digest matched")
        let event = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(news.jsonLine.utf8)) as? [String: Any])
        XCTAssertEqual(event["event"] as? String, "fileReceived")
        XCTAssertEqual(event["fileId"] as? UInt64, 42)
        XCTAssertEqual(event["name"] as? String, "report.pdf")
        XCTAssertEqual(event["user"] as? String, "bob")
        XCTAssertEqual(event["device"] as? String, "phone")
        XCTAssertEqual(event["text"] as? String, news.line)
    }

    /// A file this device keeps no record of (sent from another device) is named by its id.
    func testAFileWithoutARecordIsNamedByItsIdAndOtherNoticesAreNotNews() throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("news-\(UInt64.random(in: 0...UInt64.max))")
        let news = try XCTUnwrap(FileReceivedNews(.fileReceived(fileId: 7, by: "carol", device: "laptop"), home: home))
        XCTAssertNil(news.name)
        XCTAssertEqual(news.line, "✓✓ file 7 reached carol's device laptop: whole, its digest matched")
        XCTAssertFalse(news.jsonLine.contains("\"name\""))
        XCTAssertNil(FileReceivedNews(.delivered(messageId: 1, to: "carol"), home: home))
    }
}
