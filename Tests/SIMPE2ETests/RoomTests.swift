import SIMPE2E
import XCTest

/// Room sender keys (docs/E2E.md §8): a member who left cannot read later posts; posts are
/// signed; duplicates and reordering are handled.
final class RoomTests: XCTestCase {
    private var random = SeededRandom(seed: 11)

    /// alice, bob and carol each hold the others' sender keys for "ops".
    private func room() throws -> [String: RoomSenderKeys] {
        let names: Set = ["alice", "bob", "carol"]
        var keys = Dictionary(
            uniqueKeysWithValues: names.map {
                ($0, RoomSenderKeys(roomID: "ops", members: names.subtracting([$0]), using: &random))
            })
        for sender in names {
            // Sent over the pairwise session in real use; encoded and decoded here.
            let distribution = try SenderKeyDistribution(encoded: keys[sender]!.outbound.distribution.encoded.bytes)
            for member in keys[sender]!.members { try keys[member]!.accept(distribution, from: sender) }
        }
        return keys
    }

    func testAllMembersReadAPost() throws {
        var keys = try room()
        let post = keys["alice"]!.encrypt(Array("vault code 4417".utf8))
        for member in ["bob", "carol"] {
            XCTAssertEqual(try keys[member]!.decrypt(post, from: "alice", now: 0), Array("vault code 4417".utf8))
        }
    }

    func testARemovedMemberCannotDecryptALaterPost() throws {
        var keys = try room()
        let before = keys["alice"]!.encrypt(Array("before".utf8))
        XCTAssertEqual(try keys["carol"]!.decrypt(before, from: "alice", now: 0), Array("before".utf8))

        let distribution = try XCTUnwrap(keys["alice"]!.updateMembers(["bob"], using: &random))
        try keys["bob"]!.accept(distribution, from: "alice")
        let after = keys["alice"]!.encrypt(Array("after carol left".utf8))

        XCTAssertEqual(try keys["bob"]!.decrypt(after, from: "alice", now: 0), Array("after carol left".utf8))
        XCTAssertThrowsError(try keys["carol"]!.decrypt(after, from: "alice", now: 0))
        // Even a carol who somehow got the new distribution's key id cannot use her old chain key.
        var oldKey = InboundSenderKey(try SenderKeyDistribution(encoded: keys["bob"]!.outbound.distribution.encoded.bytes))
        XCTAssertThrowsError(try oldKey.decrypt(try RoomMessage(encoded: after), now: 0))
    }

    func testAForgedPostIsRefusedEvenByAMemberWithTheChainKey() throws {
        var keys = try room()
        var post = keys["alice"]!.encrypt(Array("real".utf8))
        post[12] ^= 0x01
        XCTAssertThrows(.authenticationFailed, try keys["bob"]!.decrypt(post, from: "alice", now: 0))
    }

    func testDuplicatesAndReorderedPosts() throws {
        var keys = try room()
        let posts = (0..<5).map { keys["bob"]!.encrypt(Array("post \($0)".utf8)) }
        for index in [3, 0, 4, 1, 2] {
            XCTAssertEqual(try keys["alice"]!.decrypt(posts[index], from: "bob", now: 0), Array("post \(index)".utf8))
        }
        XCTAssertThrows(.duplicate, try keys["alice"]!.decrypt(posts[3], from: "bob", now: 0))
    }

    func testAPostInFlightAcrossARekeyStillDecryptsAndOnlyTheNewestKeysAreKept() throws {
        var keys = try room()
        let inFlight = keys["alice"]!.encrypt(Array("sent before the re-key".utf8))
        var posts: [[UInt8]] = []
        for newcomer in ["dave", "erin", "frank"] {
            let distribution = try XCTUnwrap(keys["alice"]!.updateMembers(keys["alice"]!.members.union([newcomer]), using: &random))
            try keys["bob"]!.accept(distribution, from: "alice")
            posts.append(keys["alice"]!.encrypt(Array("after \(newcomer)".utf8)))
            if newcomer == "dave" {
                XCTAssertEqual(try keys["bob"]!.decrypt(inFlight, from: "alice", now: 0), Array("sent before the re-key".utf8))
            }
        }
        XCTAssertThrowsError(try keys["bob"]!.decrypt(keys["alice"]!.encrypt([1]), from: "carol", now: 0))
        XCTAssertEqual(try keys["bob"]!.decrypt(posts[0], from: "alice", now: 0), Array("after dave".utf8))
        XCTAssertEqual(try keys["bob"]!.decrypt(posts[2], from: "alice", now: 0), Array("after frank".utf8))
        let distribution = try XCTUnwrap(keys["alice"]!.updateMembers(["bob"], using: &random))
        try keys["bob"]!.accept(distribution, from: "alice")
        XCTAssertThrowsError(try keys["bob"]!.decrypt(posts[0], from: "alice", now: 0), "the oldest of four keys is gone")
        XCTAssertThrows(.duplicate, try keys["bob"]!.decrypt(posts[2], from: "alice", now: 0))
    }
}
