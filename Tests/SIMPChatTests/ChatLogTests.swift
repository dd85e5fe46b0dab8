import Logging
import NIOConcurrencyHelpers
import XCTest

@testable import SIMPChat

final class ChatLogTests: XCTestCase {
    func testLogEventsBecomeOneLineEachWithMetadata() {
        let log = ChatLog()
        let lines = NIOLockedValueBox<[String]>([])
        log.attach { line in lines.withLockedValue { $0.append(line) } }
        var logger = Logger(label: "test") { log.handler(label: $0, level: .info) }
        logger[metadataKey: "user"] = "alice"
        logger.info("lost the relay", metadata: ["attempt": "2"])
        logger.debug("below the level")
        XCTAssertEqual(lines.withLockedValue { $0 }, ["info: lost the relay (attempt=2 user=alice)"])
    }
}
