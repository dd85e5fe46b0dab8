import SIMPCore
import SIMPE2E
import XCTest

/// Room posts through `E2EMessenger` (docs/E2E.md §14): sender keys travel in pairwise
/// envelopes, a post is sealed once for every member device, and a changed membership makes a
/// new sender key that only the current members get.
final class RoomMessengerTests: XCTestCase {
    private var random = SeededRandom(seed: 27)

    /// alice, bob and carol, one device each, with a session from alice to each of the others
    /// and from each of them to alice (their first pairwise messages start them).
    private func threeMembers() throws -> (alice: E2EMessenger, bob: E2EMessenger, carol: E2EMessenger, stores: [MemoryStateStore]) {
        let stores = [MemoryStateStore(), MemoryStateStore(), MemoryStateStore()]
        var alice = try E2EMessenger(device: "desk", store: stores[0], using: &random)
        var bob = try E2EMessenger(device: "laptop", store: stores[1], using: &random)
        var carol = try E2EMessenger(device: "phone", store: stores[2], using: &random)
        for (name, peer) in [("bob", bob), ("carol", carol)] {
            var peer = peer
            let bundle = peer.local.prekeys.bundle(identity: peer.local.identity, oneTimePrekeys: try peer.publishPrekeys(1, using: &random))
            _ = try alice.updateDevices(of: name, bundles: [(peer.device, bundle)], using: &random)
            if name == "bob" { bob = peer } else { carol = peer }
        }
        return (alice, bob, carol, stores)
    }

    /// What a member does with a direct message from `sender`: a sender key is kept.
    private func receive(_ envelope: [UInt8], from sender: String, on member: inout E2EMessenger) throws {
        let device = try E2EEnvelope(encoded: envelope).senderDevice
        let plaintext = try member.open(envelope, from: sender, now: 0, using: &random).plaintext
        XCTAssertTrue(E2EMessenger.isSenderKeyDistribution(plaintext))
        XCTAssertEqual(try member.acceptSenderKey(plaintext, from: sender, device: device, using: &random), "ops")
    }

    func testEveryMemberReadsAPostAndARemovedMemberCannotReadALaterOne() throws {
        var (alice, bob, carol, _) = try threeMembers()
        let first = try alice.sealRoomPost(Array("vault code 4417".utf8), room: "ops", members: ["bob", "carol"], using: &random)
        XCTAssertEqual(first.distributions.map(\.user), ["bob", "carol"])
        try receive(first.distributions[0].envelope, from: "alice", on: &bob)
        try receive(first.distributions[1].envelope, from: "alice", on: &carol)
        XCTAssertEqual(try bob.openRoomPost(first.post, room: "ops", author: "alice", now: 0), Array("vault code 4417".utf8))
        XCTAssertEqual(try carol.openRoomPost(first.post, room: "ops", author: "alice", now: 0), Array("vault code 4417".utf8))
        XCTAssertThrowsError(try bob.openRoomPost(first.post, room: "ops", author: "alice", now: 0)) { XCTAssertEqual($0 as? E2EError, .duplicate) }

        // Unchanged members: no new key, nothing to distribute; the chain moves on.
        let second = try alice.sealRoomPost(Array("second".utf8), room: "ops", members: ["bob", "carol"], using: &random)
        XCTAssertTrue(second.distributions.isEmpty)
        XCTAssertEqual(try carol.openRoomPost(second.post, room: "ops", author: "alice", now: 0), Array("second".utf8))

        // carol leaves: the next post has a new key that only bob gets.
        let afterLeave = try alice.sealRoomPost(Array("carol is gone".utf8), room: "ops", members: ["bob"], using: &random)
        XCTAssertEqual(afterLeave.distributions.map(\.user), ["bob"])
        XCTAssertNotEqual(try RoomMessage(encoded: afterLeave.post).keyID, try RoomMessage(encoded: first.post).keyID)
        XCTAssertThrowsError(try carol.openRoomPost(afterLeave.post, room: "ops", author: "alice", now: 0)) { error in
            guard case E2EError.noSession = error else { return XCTFail("\(error)") }
        }
        // The post reached bob before its key (loss, reordering): not readable yet, then readable.
        XCTAssertThrowsError(try bob.openRoomPost(afterLeave.post, room: "ops", author: "alice", now: 0))
        try receive(afterLeave.distributions[0].envelope, from: "alice", on: &bob)
        XCTAssertEqual(try bob.openRoomPost(afterLeave.post, room: "ops", author: "alice", now: 0), Array("carol is gone".utf8))
    }

    func testSenderKeysSurviveAReloadFromTheStore() throws {
        var (alice, bob, _, stores) = try threeMembers()
        let first = try alice.sealRoomPost(Array("one".utf8), room: "ops", members: ["bob"], using: &random)
        try receive(first.distributions[0].envelope, from: "alice", on: &bob)
        // Both restart: alice keeps her chain (no new key), bob keeps alice's key and its position.
        var aliceAgain = try E2EMessenger(device: "desk", store: stores[0], using: &random)
        var bobAgain = try E2EMessenger(device: "laptop", store: stores[1], using: &random)
        let second = try aliceAgain.sealRoomPost(Array("two".utf8), room: "ops", members: ["bob"], using: &random)
        XCTAssertTrue(second.distributions.isEmpty)
        XCTAssertEqual(try bobAgain.openRoomPost(second.post, room: "ops", author: "alice", now: 0), Array("two".utf8))
        XCTAssertEqual(try bobAgain.openRoomPost(first.post, room: "ops", author: "alice", now: 0), Array("one".utf8), "skipped key kept")
    }

    func testAFailedDistributionMakesTheNextPostUseANewKeyForEveryMember() throws {
        var (alice, _, _, _) = try threeMembers()
        let first = try alice.sealRoomPost(Array("one".utf8), room: "ops", members: ["bob", "carol"], using: &random)
        try alice.renewSenderKeyAtNextPost(in: "ops")
        let second = try alice.sealRoomPost(Array("two".utf8), room: "ops", members: ["bob", "carol"], using: &random)
        XCTAssertEqual(second.distributions.map(\.user), ["bob", "carol"])
        XCTAssertNotEqual(try RoomMessage(encoded: second.post).keyID, try RoomMessage(encoded: first.post).keyID)
    }

    func testADistributionIsNeverTakenForAMessageAndBack() {
        let message = SIMPMessage(content: "hello").endToEndPlaintext
        XCTAssertFalse(E2EMessenger.isSenderKeyDistribution(message))
        XCTAssertFalse(E2EMessenger.isSenderKeyDistribution(SIMPMessage(content: "").endToEndPlaintext))
        XCTAssertTrue(E2EMessenger.isSenderKeyDistribution([1, 4]))
    }
}
