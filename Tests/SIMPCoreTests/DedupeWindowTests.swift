import SIMPCore
import XCTest

final class DedupeWindowTests: XCTestCase {
    func testFirstArrivalDeliversAndRepeatIsDuplicate() {
        var window = DedupeWindow(size: 64)
        XCTAssertEqual(window.accept(42), .deliver)
        XCTAssertEqual(window.accept(42), .duplicate)
        XCTAssertEqual(window.highest, 42)
    }

    func testOutOfOrderIdsInsideWindowDeliverOnceEach() {
        var window = DedupeWindow(size: 64)
        let order: [UInt64] = [10, 5, 7, 3, 9, 4]
        XCTAssertEqual(order.map { window.accept($0) }, Array(repeating: .deliver, count: order.count))
        XCTAssertEqual(order.map { window.accept($0) }, Array(repeating: .duplicate, count: order.count))
        XCTAssertEqual(window.accept(6), .deliver)
        XCTAssertEqual(window.highest, 10)
    }

    func testIdsOlderThanWindowAreTooOld() {
        var window = DedupeWindow(size: 64)
        XCTAssertEqual(window.accept(100), .deliver)
        XCTAssertEqual(window.accept(36), .tooOld) // 100 - 36 == size
        XCTAssertEqual(window.accept(1), .tooOld)
        XCTAssertEqual(window.accept(37), .deliver) // the oldest id still inside
        XCTAssertEqual(window.accept(37), .duplicate)
    }

    func testSlidingClearsSlotsThatReenterTheWindow() {
        var window = DedupeWindow(size: 64)
        for id in UInt64(1)...5 { XCTAssertEqual(window.accept(id), .deliver) }
        XCTAssertEqual(window.accept(60), .deliver)
        XCTAssertEqual(window.accept(66), .deliver)
        // 65 and 66 share slots with 1 and 2, which left the window.
        XCTAssertEqual(window.accept(65), .deliver)
        XCTAssertEqual(window.accept(2), .tooOld)
        XCTAssertEqual(window.accept(3), .duplicate)
    }

    func testJumpLargerThanWindowClearsState() {
        var window = DedupeWindow(size: 64)
        for id in UInt64(1)...10 { XCTAssertEqual(window.accept(id), .deliver) }
        let jump: UInt64 = 10 + 64 * 20
        XCTAssertEqual(window.accept(jump), .deliver)
        XCTAssertEqual(window.highest, jump)
        // Ids sharing slots with 1...9 are new.
        for id in (jump - 9)..<jump { XCTAssertEqual(window.accept(id), .deliver, "\(id)") }
        XCTAssertEqual(window.accept(jump), .duplicate)
        XCTAssertEqual(window.accept(jump - 64), .tooOld)
        XCTAssertEqual(window.accept(10), .tooOld)
        XCTAssertEqual(window.accept(jump - 63), .deliver)
    }

    /// Two processes of one user (two devices, or `simp send` beside `simp chat`) number their
    /// messages independently: the older process's lower ids are not "too old" once the newer
    /// one delivered, and an id seen on one stream is a duplicate on another (an outbox resend).
    func testEachStreamOfASenderHasItsOwnWindowAndAnIdIsDeliveredOnceAcrossThem() {
        var dedupe = SenderDedupe(windowSize: 64, streamsPerSender: 2)
        XCTAssertEqual(dedupe.accept(10_000, from: "alice", stream: 10_000), .deliver) // the newer process
        XCTAssertEqual(dedupe.accept(5, from: "alice", stream: 5), .deliver) // the older one, far below
        XCTAssertEqual(dedupe.accept(6, from: "alice", stream: 5), .deliver)
        XCTAssertEqual(dedupe.accept(6, from: "alice", stream: 5), .duplicate)
        XCTAssertEqual(dedupe.accept(6, from: "alice", stream: 10_000), .duplicate, "resent by the newer process")
        XCTAssertEqual(dedupe.accept(6, from: "bob", stream: 5), .deliver, "another sender")
        XCTAssertEqual(dedupe.accept(1, from: "alice", stream: 10_000), .tooOld, "still judged within its own stream")
        // A third stream forgets the least recently used one (10_000 was used last).
        XCTAssertEqual(dedupe.accept(7, from: "alice", stream: 5), .deliver)
        XCTAssertEqual(dedupe.accept(20_000, from: "alice", stream: 20_000), .deliver)
        XCTAssertEqual(dedupe.accept(10_000, from: "alice", stream: 10_000), .deliver, "its window was forgotten, not stream 5's")
        XCTAssertEqual(dedupe.accept(7, from: "alice", stream: 5), .deliver, "stream 5 was forgotten in turn")
    }
}
