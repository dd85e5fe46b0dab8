import SIMPRedis
import SIMPRelay
import XCTest

/// Every key of one user (one room) shares a Redis Cluster slot, whatever the id holds, and
/// scanned keys give the id back.
final class KeyTagTests: XCTestCase {
    private let users = ["alice", "}x", "{", "a}b", "a{b}c", "%7D", "50%", "é{ü}", "x}:ids"]

    func testEveryKeyOfAUserSharesItsSlot() {
        for user in users {
            let keys = [
                Registry.userKey(user), Registry.seenKey(user), CredentialStore.key(user), InboxStore.logKey(user),
                InboxStore.idsKey(user), PresenceStore.presenceKey(user), PresenceStore.roomsKey(user),
                Registry.devicesKey(user), InboxStore.cursorsKey(user), InboxStore.ackedKey(user, device: "desk"),
            ]
            XCTAssertEqual(Set(keys.map { RedisKeySlot.slot(of: $0) }).count, 1, "\(user): \(keys)")
        }
        let room = "lobby"
        let roomKeys = [
            RoomStore.membersKey(room), RoomStore.seqKey(room), RoomStore.postedKey(room),
            RoomStore.gotKey(room, author: "a}b", messageId: 7),
        ]
        XCTAssertEqual(Set(roomKeys.map { RedisKeySlot.slot(of: $0) }).count, 1, "\(roomKeys)")
    }

    func testScannedKeysGiveTheUserBackAndNamesDoNotCollide() {
        for user in users {
            XCTAssertEqual(KeyTag.user(inKey: Registry.userKey(user), prefix: Registry.userKeyPrefix), user)
            XCTAssertEqual(KeyTag.user(inKey: CredentialStore.key(user), prefix: CredentialStore.keyPrefix), user)
        }
        XCTAssertEqual(Registry.userKey("alice"), "simp:user:{alice}")
        XCTAssertEqual(Set(users.map { InboxStore.logKey($0) }).count, users.count)
        XCTAssertFalse(users.map { InboxStore.logKey($0) }.contains(InboxStore.idsKey("x")), "a user named x}:ids has no key of x's")
        XCTAssertEqual(InboxStore.ackedKey("alice", device: "desk"), "simp:log-acked:{alice}:d:desk")
        XCTAssertNil(KeyTag.user(inKey: "simp:user:alice", prefix: Registry.userKeyPrefix), "an untagged (older) key")
    }
}
