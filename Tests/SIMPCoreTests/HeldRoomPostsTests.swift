import SIMPCore
import XCTest

/// Room posts waiting for their author's sender key (`HeldRoomPosts`), with the wall clock
/// passed in: bounded in number and time, given up with a reason, released in the room's
/// order when the key arrives, and their authors asked for them once.
final class HeldRoomPostsTests: XCTestCase {
    private let t0: UInt64 = 1_700_000_000_000

    private func post(_ id: UInt64, seq: UInt64? = nil, room: String = "ops", by author: String = "alice", authorId: UInt64? = nil) -> SIMPMessage {
        var post = SIMPMessage(kind: .text, messageId: id, fromUser: "#" + room, toUser: "bob")
        (post.author, post.room, post.seq, post.authorMessageId) = (author, room, seq ?? id, authorId ?? id + 1_000)
        return post
    }

    func testBeyondTheCapTheOldestPostIsGivenUpAndItsAuthorAsked() {
        var held = HeldRoomPosts()
        for id in 1...UInt64(HeldRoomPosts.maxHeld) { XCTAssertNil(held.hold(post(id), since: t0)) }
        XCTAssertEqual(held.posts.count, HeldRoomPosts.maxHeld)
        XCTAssertTrue(held.unread.isEmpty)

        let givenUp = held.hold(post(999), since: t0 + 1)
        XCTAssertEqual(givenUp, HeldRoomPosts.GivenUp(message: post(1), reason: .tooManyWaiting))
        XCTAssertEqual(givenUp?.reason.description, "too many posts wait for sender keys")
        XCTAssertEqual(held.posts.count, HeldRoomPosts.maxHeld)
        XCTAssertEqual(held.posts.first?.message.messageId, 2)
        XCTAssertEqual(held.posts.last, HeldRoomPosts.Post(message: post(999), since: t0 + 1))
        XCTAssertEqual(held.unread, [post(1)])
    }

    func testAPostIsGivenUpOnlyOnceItWaitedLongerThanTheLimit() {
        var held = HeldRoomPosts()
        _ = held.hold(post(1), since: t0)
        _ = held.hold(post(2), since: t0 + 10_000)
        XCTAssertEqual(held.expire(now: t0 + HeldRoomPosts.maxWaitMilliseconds), [], "exactly the limit still waits")
        let expired = held.expire(now: t0 + HeldRoomPosts.maxWaitMilliseconds + 1)
        XCTAssertEqual(expired, [HeldRoomPosts.GivenUp(message: post(1), reason: .keyDidNotArrive)])
        XCTAssertEqual(expired.first?.reason.description, "its author's sender key did not arrive")
        XCTAssertEqual(held.posts.map(\.message.messageId), [2])
        XCTAssertEqual(held.unread.map(\.messageId), [1])
        XCTAssertEqual(held.expire(now: t0 - 5_000), [], "a wall clock set back gives nothing up")
        XCTAssertEqual(held.posts.map(\.message.messageId), [2])
    }

    func testAKeyReleasesOnlyItsAuthorsPostsInTheRoomInTheRoomsOrder() {
        var held = HeldRoomPosts()
        _ = held.hold(post(1, seq: 7), since: t0)
        _ = held.hold(post(2, seq: 5), since: t0 + 1)
        _ = held.hold(post(3, by: "carol"), since: t0 + 2)
        _ = held.hold(post(4, room: "dev"), since: t0 + 3)

        let released = held.release(room: "ops", author: "alice")
        XCTAssertEqual(released.map(\.message.messageId), [2, 1], "by seq, not by arrival")
        XCTAssertEqual(released.map(\.since), [t0 + 1, t0])
        XCTAssertEqual(held.posts.map(\.message.messageId), [3, 4])
        XCTAssertEqual(held.release(room: "ops", author: "alice"), [])
        XCTAssertTrue(held.unread.isEmpty, "released posts are not given up")
    }

    func testPostsTakenOutToBeHandedOverCanBeKeptAgainAsTheyWere() {
        var held = HeldRoomPosts(posts: [.init(message: post(1), since: t0), .init(message: post(2), since: t0 + 1)])
        let all = held.releaseAll()
        XCTAssertEqual(all.map(\.message.messageId), [1, 2])
        XCTAssertTrue(held.posts.isEmpty)
        for saved in all { held.keep(saved) }
        XCTAssertEqual(held.posts, all, "kept with the time they arrived")
        XCTAssertEqual(held.expire(now: t0 + HeldRoomPosts.maxWaitMilliseconds + 1).map(\.message.messageId), [1])
    }

    func testEachAuthorIsAskedOnceWithItsOwnIdAndPostsWithoutOneAreNotAsked() {
        var held = HeldRoomPosts()
        _ = held.hold(post(1, authorId: 41), since: t0)
        _ = held.hold(post(2, authorId: 0), since: t0) // the author's id unknown
        _ = held.hold(post(3, by: ""), since: t0) // the author unknown
        XCTAssertEqual(held.expire(now: t0 + HeldRoomPosts.maxWaitMilliseconds + 1).count, 3, "each is told to the user")

        let asked = held.takeRequestsToAuthors()
        XCTAssertEqual(asked.map(\.messageId), [41])
        XCTAssertEqual(asked.map(\.fromUser), ["alice"])
        XCTAssertEqual(asked.first?.e2ePayload, post(1).e2ePayload)
        XCTAssertTrue(held.unread.isEmpty)
        XCTAssertEqual(held.takeRequestsToAuthors(), [], "never asked twice")
    }

    func testAtMostTheCapOfGivenUpPostsWaitsForTheirAuthorsToBeAsked() {
        var held = HeldRoomPosts()
        for id in 1...UInt64(HeldRoomPosts.maxHeld + 10) { _ = held.hold(post(id), since: t0) }
        XCTAssertEqual(held.unread.count, 10)
        XCTAssertEqual(held.expire(now: t0 + HeldRoomPosts.maxWaitMilliseconds + 1).count, HeldRoomPosts.maxHeld, "all told")
        XCTAssertEqual(held.unread.count, HeldRoomPosts.maxHeld, "the rest are only told")
        XCTAssertEqual(held.takeRequestsToAuthors().first?.messageId, 1_001)
    }
}
