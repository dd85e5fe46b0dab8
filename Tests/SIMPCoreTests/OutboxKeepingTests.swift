import NIOCore
import SIMPCore
import XCTest

/// A client whose outbox cannot be written (`OutboxKeeping`), in virtual time: messages kept in
/// memory, the user told once when writing fails and once when it works again, the kept
/// messages written again every retry interval, oldest first.
final class OutboxKeepingTests: XCTestCase {
    private let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000)

    private func message(_ id: UInt64) -> SIMPMessage {
        SIMPMessage(kind: .text, messageId: id, fromUser: "alice", toUser: "bob", content: "m\(id)")
    }

    func testAFailedOutboxKeepsMessagesInMemoryTellsOnceAndTriesAgainEveryInterval() {
        var keeping = OutboxKeeping()
        XCTAssertTrue(keeping.writesToOutbox)
        keeping.keepInMemory(message(2))

        let first = keeping.writeFailed("No space left on device", now: t0)
        keeping.keepInMemory(message(1))
        let second = keeping.writeFailed("No space left on device", now: t0 + .milliseconds(500))

        XCTAssertEqual([first.tellUser, second.tellUser], [true, false], "told once")
        XCTAssertEqual(first.retryAt, t0 + .seconds(2))
        XCTAssertNil(second.retryAt, "one retry planned at a time")
        XCTAssertFalse(keeping.writesToOutbox, "new messages go to memory until the outbox works again")

        XCTAssertEqual(keeping.retryDue()?.map(\.messageId), [1, 2], "oldest first")
        let again = keeping.writeFailed("No space left on device", now: t0 + .seconds(2))
        XCTAssertEqual(again.retryAt, t0 + .seconds(4), "still failing: tried again an interval later")
        XCTAssertFalse(again.tellUser)

        let kept = keeping.retryDue()!
        keeping.rewritten(kept)
        XCTAssertTrue(keeping.writesToOutbox)
        XCTAssertEqual(keeping.inMemory, [:])
        XCTAssertNil(keeping.retryDue(), "the outbox works: nothing to write")
        XCTAssertTrue(keeping.writeFailed("EIO", now: t0 + .seconds(9)).tellUser, "a new failure is told again")
    }

    func testASettledMessageIsNoLongerKept() {
        var keeping = OutboxKeeping()
        keeping.keepInMemory(message(1))
        keeping.keepInMemory(message(2))
        _ = keeping.writeFailed("No space left on device", now: t0)
        keeping.settled(1)
        XCTAssertEqual(keeping.inMemory.keys.sorted(), [2])
        XCTAssertEqual(keeping.retryDue()?.map(\.messageId), [2])
    }
}
