import Foundation
import Logging
import SIMPCore
import SIMPE2E
import XCTest

@testable import SIMPClient

/// A room post whose sender key has not arrived (its distribution was lost and is being
/// retransmitted, or the inbox delivered the post first) is held, not lost (docs/E2E.md §14.3).
final class EndToEndRoomHoldTests: XCTestCase {
    private var home: URL!

    override func setUp() {
        home = FileManager.default.temporaryDirectory.appendingPathComponent("simp-e2e-hold-\(UUID().uuidString)")
    }

    override func tearDown() {
        try? FileManager.default.removeItem(at: home)
    }

    func testAPostThatArrivesBeforeItsSenderKeyIsHandedOverWhenTheKeyArrives() throws {
        let logger = Logger(label: "test")
        let alice = try EndToEnd(settings: EndToEndSettings(home: home), user: "alice", device: "desk", logger: logger)
        let bob = try EndToEnd(settings: EndToEndSettings(home: home), user: "bob", device: "laptop", logger: logger)
        var random = SystemRandomNumberGenerator()
        let prekeys = try bob.messenger.publishPrekeys(1, using: &random)
        let bundle = bob.messenger.local.prekeys.bundle(identity: bob.messenger.local.identity, oneTimePrekeys: prekeys)
        _ = try alice.messenger.updateDevices(of: "bob", bundles: [("laptop", bundle)], using: &random)
        let sealed = try alice.messenger.sealRoomPost(
            SIMPMessage(content: "vault code 4417").endToEndPlaintext, room: "ops", members: ["bob"], using: &random)

        // The copies as the relay hands them to bob: the post, then alice's direct message with the key.
        var post = SIMPMessage(kind: .text, messageId: 1, fromUser: "#ops", toUser: "bob").sealedEndToEnd(sealed.post)
        (post.author, post.room, post.seq) = ("alice", "ops", 1)
        let key = SIMPMessage(kind: .text, messageId: 7, fromUser: "alice", toUser: "bob").sealedEndToEnd(sealed.distributions[0].envelope)
        var late: [SIMPMessage] = []
        var notices: [EndToEndNotice] = []
        bob.rooms.deliverLate = { late.append($0) }
        bob.onNotice = { notices.append($0) }

        XCTAssertNil(bob.open(post), "held until its sender key arrives")
        XCTAssertEqual(bob.rooms.held.count, 1)
        XCTAssertNil(bob.open(key), "a sender key is not shown")
        XCTAssertEqual(late.map(\.content), ["vault code 4417"])
        XCTAssertEqual(late.map(\.author), ["alice"])
        XCTAssertTrue(bob.rooms.held.isEmpty)
        XCTAssertEqual(
            bob.open(post)?.content, "vault code 4417", "a copy delivered again is handed over as it was opened (the application knows it has it)")
        try bob.commit()
        let restarted = try EndToEnd(settings: EndToEndSettings(home: home), user: "bob", device: "laptop", logger: logger)
        XCTAssertEqual(restarted.open(post)?.content, "vault code 4417", "and after a restart that kept the chain step")
        XCTAssertEqual(notices, [])

        // An altered post (the relay flipped a bit) is not shown; the user is told.
        let next = try alice.messenger.sealRoomPost(SIMPMessage(content: "two").endToEndPlaintext, room: "ops", members: ["bob"], using: &random)
        var altered = post
        (altered.messageId, altered.seq) = (2, 2)
        altered.e2ePayload = next.post
        altered.e2ePayload[12] ^= 1
        XCTAssertNil(bob.open(altered))
        XCTAssertEqual(notices.count, 1)
        guard case .undecryptable(user: "alice", _, _)? = notices.first else { return XCTFail("\(notices)") }
        XCTAssertTrue(bob.rooms.held.isEmpty, "a post that fails to verify is not held")
    }

    /// Posts an earlier process held are reloaded from the device's store: one still within its
    /// 60 s waits again (and is handed over when its key comes), one that waited longer is
    /// reported at load; the store keeps only what still waits.
    func testHeldPostsAreReloadedAtStartAndThoseWaitingTooLongAreReported() throws {
        let logger = Logger(label: "test")
        let store = EndToEndFileStore(home: home, user: "bob", device: "laptop")
        let now = UInt64(WallClock.millisecondsSinceEpoch())
        var waiting = SIMPMessage(kind: .text, messageId: 1, fromUser: "#ops", toUser: "bob").sealedEndToEnd([1, 3, 0, 0, 0, 1])
        (waiting.author, waiting.room, waiting.seq) = ("alice", "ops", 1)
        var expired = waiting
        (expired.messageId, expired.seq) = (2, 2)
        let saved = [
            HeldRoomPosts.Post(message: expired, since: now - HeldRoomPosts.maxWaitMilliseconds - 1_000),
            HeldRoomPosts.Post(message: waiting, since: now),
        ]
        try store.save(RoomPosts.storeName, SecretBytes(RoomPosts.encoded(saved)))

        let bob = try EndToEnd(settings: EndToEndSettings(home: home), user: "bob", device: "laptop", logger: logger)
        var notices: [EndToEndNotice] = []
        bob.onNotice = { notices.append($0) }
        bob.resumeHeldPosts()
        XCTAssertEqual(bob.rooms.held.map(\.message.messageId), [1])
        XCTAssertEqual(notices.count, 1)
        guard case .undecryptable(user: "alice", messageId: 2, _)? = notices.first else { return XCTFail("\(notices)") }
        try bob.commit() // written with the next receipt, or when the client closes (docs/E2E.md §15)
        let kept = try EndToEndFileStore(home: home, user: "bob", device: "laptop").load(RoomPosts.storeName).map(RoomPosts.decoded) ?? []
        XCTAssertEqual(kept.map(\.message.messageId), [1])
        XCTAssertEqual(kept.map(\.since), [now])
        XCTAssertEqual(kept.first?.message, waiting, "kept as received")
    }

    /// The `held` entry (docs/E2E.md §14.4) round-trips, and a damaged one is refused rather
    /// than read as other posts: truncated, with bytes left over, or of another version.
    func testTheHeldEntryRoundTripsAndADamagedOneIsRefused() throws {
        var post = SIMPMessage(kind: .text, messageId: 9, fromUser: "#ops", toUser: "bob").sealedEndToEnd([1, 3, 7])
        (post.author, post.room, post.seq) = ("alice", "ops", 4)
        let bytes = RoomPosts.encoded([.init(message: post, since: 1_700_000_000_000)])
        XCTAssertEqual(Array(bytes.prefix(11)), [1, 0, 1, 0, 0, 0x01, 0x8B, 0xCF, 0xE5, 0x68, 0x00])
        let decoded = try RoomPosts.decoded(bytes)
        XCTAssertEqual(decoded.map(\.message), [post])
        XCTAssertEqual(decoded.map(\.since), [1_700_000_000_000])
        XCTAssertEqual(try RoomPosts.decoded(RoomPosts.encoded([])).count, 0)
        for damaged in [Array(bytes.dropLast()), bytes + [0], [2] + bytes.dropFirst()] {
            XCTAssertThrowsError(try RoomPosts.decoded(damaged))
        }
    }
}
