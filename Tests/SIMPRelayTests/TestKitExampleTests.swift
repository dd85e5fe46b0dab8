import Foundation
import SIMPCore
import SIMPTestKit
import XCTest

/// The example of docs/ARCHITECTURE.md ("Testing against SIMP: the test kit"), line for line, so
/// the documented code is compiled and run: a message through the real relay and its receipt
/// back, with no sockets and no Redis.
final class TestKitExampleTests: XCTestCase {
    func testTheArchitectureDocsExample() throws {
        let relay = try EmbeddedRelay() // the real relay engine on an EmbeddedEventLoop, in-memory store
        try relay.connect("alice", port: 50_000) // CONNECT, CONNECTED, HELLO: keys kept by the kit
        try relay.connect("bob", port: 50_010)
        try relay.sendDatagram(SIMPMessage(kind: .text, messageId: 1, fromUser: "alice", toUser: "bob", content: "hi"))
        let delivered = try XCTUnwrap(relay.readDatagram()) // opened with bob's session keys
        XCTAssertEqual(delivered.user, "bob")
        XCTAssertEqual(delivered.message.content, "hi")
        try relay.send(SIMPMessage(kind: .receipt, messageId: 1, fromUser: "bob", toUser: "alice"), on: relay.control(of: "bob"))
        XCTAssertEqual(try relay.read(from: relay.control(of: "alice"))?.kind, .receipt)
        relay.advance(by: .seconds(30)) // virtual time: the relay's timers (heartbeats) run now
    }

    /// The example in the docs is the body of `testTheArchitectureDocsExample`, line for line.
    func testTheDocsShowTheExampleThisTestRuns() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let docs = try String(contentsOf: root.appendingPathComponent("docs/ARCHITECTURE.md"), encoding: .utf8)
        let section = try XCTUnwrap(docs.range(of: "## Testing against SIMP: the test kit"), "the section is there")
        let block = try XCTUnwrap(docs[section.upperBound...].components(separatedBy: "```swift\n").dropFirst().first)
        let example = try XCTUnwrap(block.components(separatedBy: "```").first).split(separator: "\n").map(String.init)
        let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
        let body = try XCTUnwrap(source.components(separatedBy: "func testTheArchitectureDocsExample() throws {\n").last)
        let ran = body.split(separator: "\n").prefix(example.count).map { $0.trimmingCharacters(in: .whitespaces) }
        XCTAssertEqual(example.count, 10, "a ten-line example")
        XCTAssertEqual(example, ran)
    }
}
