import SIMPE2E
import XCTest

/// Who gets a member's sender key (docs/E2E.md §8.4): the members present at first use, and
/// those a member admitted; a user the relay lists without an admit waits and is told.
final class RoomAdmissionTests: XCTestCase {
    /// alice's view of #ops after her first post there, with alice and bob in it.
    private func alicesRoom() -> RoomAdmission {
        var room = RoomAdmission(roomID: "ops", localUser: "alice")
        XCTAssertEqual(room.membersListed(["alice", "bob"], now: 500), [], "lists before the first use say nothing")
        XCTAssertFalse(room.hasSeenRoom)
        XCTAssertTrue(room.firstUse(["alice", "bob"]))
        return room
    }

    func testTheFirstUseAdmitsEveryoneListedThenAndOnlyTheFirst() {
        var room = alicesRoom()
        XCTAssertEqual(room.admitted, ["alice", "bob"])
        XCTAssertEqual(room.readers(among: ["alice", "bob"]), ["bob"])
        XCTAssertFalse(room.firstUse(["alice", "bob", "carol"]))
        XCTAssertEqual(room.readers(among: ["alice", "bob", "carol"]), ["bob"])
    }

    func testTheCreatorAloneAdmitsOnlyItself() {
        var room = RoomAdmission(roomID: "ops", localUser: "alice")
        room.firstUse(["alice"])
        XCTAssertEqual(room.membersListed(["alice", "bob"], now: 5), [.waiting(user: "bob")])
        XCTAssertEqual(room.readers(among: ["alice", "bob"]), [])
    }

    func testAJoinByNameWaitsGetsNoKeyAndIsToldOnceUntilTheReminder() {
        var room = alicesRoom()
        XCTAssertEqual(room.membersListed(["alice", "bob", "carol"], now: 2_000), [.waiting(user: "carol")])
        XCTAssertEqual(room.readers(among: ["alice", "bob", "carol"]), ["bob"])
        XCTAssertEqual(room.membersListed(["alice", "bob", "carol"], now: 3_000), [], "told once")
        let later = 2_000 + RoomAdmission.remindAfterMilliseconds
        XCTAssertEqual(room.membersListed(["alice", "bob", "carol"], now: later), [.waiting(user: "carol")], "told again after an hour")
    }

    func testAnAdmitByThisUserLetsTheUserRead() {
        var room = alicesRoom()
        _ = room.membersListed(["alice", "bob", "carol"], now: 2_000)
        XCTAssertEqual(room.admit("carol"), .admitted(user: "carol", by: "alice"))
        XCTAssertNil(room.admit("carol"), "admitted already")
        XCTAssertEqual(room.readers(among: ["alice", "bob", "carol"]), ["bob", "carol"])
        XCTAssertEqual(room.waiting, [:])
    }

    func testAnAdmitFromAnAdmittedMemberIsTakenOneFromAnyoneElseIsNot() {
        var room = alicesRoom()
        _ = room.membersListed(["alice", "bob", "carol", "mallory"], now: 2_000)
        let admitCarol = RoomAdmit(roomID: "ops", user: "carol")
        XCTAssertNil(room.admitReceived(RoomAdmit(roomID: "ops", user: "mallory"), from: "mallory"), "not admitted herself")
        XCTAssertNil(room.admitReceived(admitCarol, from: "carol"), "a waiting user cannot admit herself")
        XCTAssertNil(room.admitReceived(RoomAdmit(roomID: "dev", user: "carol"), from: "bob"), "another room")
        XCTAssertEqual(room.admitReceived(admitCarol, from: "bob"), .admitted(user: "carol", by: "bob"))
        XCTAssertNil(room.admitReceived(admitCarol, from: "bob"), "taken already")
        XCTAssertEqual(room.readers(among: ["alice", "bob", "carol", "mallory"]), ["bob", "carol"])
    }

    func testAMemberWhoLeftMustBeAdmittedAgain() {
        var room = alicesRoom()
        XCTAssertEqual(room.membersListed(["alice"], now: 2_000), [])
        XCTAssertEqual(room.admitted, ["alice"])
        XCTAssertEqual(room.membersListed(["alice", "bob"], now: 3_000), [.waiting(user: "bob")])
    }

    func testAWaitingUserWhoLeftIsToldAgainWhenBack() {
        var room = alicesRoom()
        XCTAssertEqual(room.membersListed(["alice", "bob", "carol"], now: 2_000), [.waiting(user: "carol")])
        XCTAssertEqual(room.membersListed(["alice", "bob"], now: 2_500), [])
        XCTAssertEqual(room.membersListed(["alice", "bob", "carol"], now: 3_000), [.waiting(user: "carol")])
    }

    func testTheStoredFormKeepsTheAdmittedNotTheWaiting() throws {
        var room = alicesRoom()
        _ = room.membersListed(["alice", "bob", "carol"], now: 2_000)
        XCTAssertEqual(room.encoded, [0x01, 0x00, 0x02, 0x00, 0x05] + Array("alice".utf8) + [0x00, 0x03] + Array("bob".utf8))
        var restored = try RoomAdmission(roomID: "ops", localUser: "alice", encoded: room.encoded)
        XCTAssertEqual(restored.admitted, ["alice", "bob"])
        XCTAssertTrue(restored.hasSeenRoom)
        XCTAssertEqual(restored.membersListed(["alice", "bob", "carol"], now: 2_100), [.waiting(user: "carol")], "a new process tells again")
        XCTAssertThrowsError(try RoomAdmission(roomID: "ops", localUser: "alice", encoded: [0x02, 0x00, 0x00]))
        XCTAssertThrowsError(try RoomAdmission(roomID: "ops", localUser: "alice", encoded: room.encoded + [0]))
    }

    func testAnAdmitRoundTripsAndIsToldFromOtherPlaintexts() throws {
        let admit = RoomAdmit(roomID: "ops", user: "carol")
        XCTAssertEqual(admit.encoded, [0x01, 0x28, 0x00, 0x03] + Array("ops".utf8) + [0x00, 0x05] + Array("carol".utf8))
        XCTAssertEqual(try RoomAdmit(encoded: admit.encoded), admit)
        XCTAssertTrue(RoomAdmit.isAdmit(admit.encoded))
        XCTAssertFalse(RoomAdmit.isAdmit([0x01, 0x04, 0x00]))
        XCTAssertFalse(E2EMessenger.isSenderKeyDistribution(admit.encoded))
        XCTAssertThrowsError(try RoomAdmit(encoded: admit.encoded.dropLast()))
        XCTAssertThrowsError(try RoomAdmit(encoded: [0x01, 0x28, 0x00, 0x01, 0xFF, 0x00, 0x00]), "not UTF-8")
    }
}

/// A post's delivery mark counts only the members who can read it (docs/E2E.md §14.2).
final class RoomPostReadersTests: XCTestCase {
    func testOnlyReadersReceiptsCount() {
        var posts = RoomPostReaders()
        posts.sealed(7, readers: ["bob", "dave"])
        XCTAssertEqual(posts.counted(7, member: "carol").map { [$0.delivered, $0.of] }, [0, 2], "carol has it, cannot read it")
        XCTAssertEqual(posts.counted(7, member: "bob").map { [$0.delivered, $0.of] }, [1, 2])
        XCTAssertEqual(posts.counted(7, member: "bob").map { [$0.delivered, $0.of] }, [1, 2], "counted once")
        XCTAssertEqual(posts.counted(7, member: "dave").map { [$0.delivered, $0.of] }, [2, 2])
        XCTAssertNil(posts.counted(8, member: "bob"), "a post not sealed here: the relay's count stands")
        XCTAssertNil(posts.counted(7, member: nil), "a relay that does not say whose receipt")
    }

    func testAPostSealedHereCountsItsReadersOnceSubmittedAndUnsubmittedOnesAreBounded() {
        var posts = RoomPostReaders()
        posts.sealing([1, 2, 3], readers: ["bob"])
        posts.submitted([9, 9], as: 5) // not sealed here
        XCTAssertNil(posts.counted(5, member: "bob"))
        posts.submitted([1, 2, 3], as: 6)
        XCTAssertEqual(posts.counted(6, member: "bob").map { [$0.delivered, $0.of] }, [1, 1])
        posts.submitted([1, 2, 3], as: 7)
        XCTAssertNil(posts.counted(7, member: "bob"), "submitted once")

        for byte in 0...UInt8(RoomPostReaders.maxUnsubmitted - 1) { posts.sealing([0, byte], readers: ["bob"]) }
        posts.submitted([0, 0], as: 8)
        XCTAssertNotNil(posts.counted(8, member: "bob"), "up to the bound, each is kept")
        posts.sealing([1, 0], readers: ["bob"]) // the bound again
        posts.sealing([1, 1], readers: ["bob"]) // beyond it: those not submitted are forgotten
        posts.submitted([0, 1], as: 9)
        XCTAssertNil(posts.counted(9, member: "bob"), "forgotten: the relay's count stands")
        posts.submitted([1, 1], as: 10)
        XCTAssertNotNil(posts.counted(10, member: "bob"))
    }

    func testTheOldestPostsAreForgotten() {
        var posts = RoomPostReaders()
        for id in 1...UInt64(RoomPostReaders.maxPosts + 1) { posts.sealed(id, readers: ["bob"]) }
        XCTAssertNil(posts.counted(1, member: "bob"))
        XCTAssertNotNil(posts.counted(2, member: "bob"))
    }
}
