import NIOCore
import SIMPCore
import XCTest

@testable import SIMPClient

/// The messages a device keeps to send again when a peer device asks (docs/E2E.md §7.5):
/// each at most once, only to its receiver, for a bounded number and time.
final class SentLogTests: XCTestCase {
    private let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    func testAMessageIsSentAgainOnceAndOnlyToItsReceiver() {
        var log = SentLog()
        log.record(1, SIMPMessage(kind: .text, toUser: "bob", content: "hi"), now: start)
        XCTAssertNil(log.takeForResend(1, to: "mallory"), "another user cannot have it")
        XCTAssertEqual(log.takeForResend(1, to: "bob")?.message?.content, "hi")
        XCTAssertNil(log.takeForResend(1, to: "bob"), "never twice")
        XCTAssertTrue(log.contains(1))
        XCTAssertNil(log.takeForResend(2, to: "bob"), "never sent")
    }

    func testAFrameOfTheEndToEndLayerIsKeptWithoutContent() {
        var log = SentLog()
        log.record(3, nil, now: start) // a resend request or a sender key
        XCTAssertNil(log.takeForResend(3, to: "bob")?.message)
    }

    func testTheLogIsBoundedInCountAndTime() {
        var log = SentLog()
        for id in 1...UInt64(SentLog.maxKept + 1) { log.record(id, SIMPMessage(kind: .text, toUser: "bob"), now: start) }
        XCTAssertFalse(log.contains(1), "the oldest went")
        XCTAssertTrue(log.contains(2))
        log.record(10_000, SIMPMessage(kind: .text, toUser: "bob"), now: start + SentLog.lifetime + .seconds(1))
        XCTAssertFalse(log.contains(2), "older than the lifetime")
        XCTAssertTrue(log.contains(10_000))
    }
}
