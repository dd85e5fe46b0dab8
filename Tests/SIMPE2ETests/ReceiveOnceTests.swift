import SIMPE2E
import XCTest

/// A message's plaintext is kept with its id, saved with the ratchet step that opened it
/// (docs/E2E.md §15): a copy delivered again, by this process or after a restart that kept
/// that step, is handed over as it was first opened, never dropped as a duplicate of a key
/// already used; a restart that lost the step decrypts the copy again.
final class ReceiveOnceTests: XCTestCase {
    private var random = SeededRandom(seed: 41)
    private let bobStore = MemoryStateStore()
    private var alice: E2EMessenger!
    private var bob: E2EMessenger!

    override func setUpWithError() throws {
        alice = try E2EMessenger(device: "desk", store: MemoryStateStore(), using: &random)
        bob = try E2EMessenger(device: "phone", store: bobStore, using: &random)
        let bundle = bob.local.prekeys.bundle(identity: bob.local.identity, oneTimePrekeys: [])
        _ = try alice.updateDevices(of: "bob", bundles: [("phone", bundle)], using: &random)
    }

    private func receive(_ envelope: [UInt8], id: UInt64) throws -> Received {
        try bob.receive(envelope, messageId: id, from: "alice", now: 0, using: &random)
    }

    func testACopyDeliveredAgainAfterARestartIsHandedOverAsItWasOpened() throws {
        let first = try alice.seal(Array("one".utf8), to: "bob"), second = try alice.seal(Array("two".utf8), to: "bob")
        XCTAssertEqual(try receive(first, id: 1), Received(plaintext: Array("one".utf8), notices: [], openedBefore: false))
        XCTAssertEqual(try receive(second, id: 2).plaintext, Array("two".utf8))
        // bob's process dies after the steps were stored but before the receipts left.
        bob = try E2EMessenger(device: "phone", store: bobStore, using: &random)
        XCTAssertEqual(try receive(first, id: 1), Received(plaintext: Array("one".utf8), notices: [], openedBefore: true))
        XCTAssertEqual(try receive(second, id: 2), Received(plaintext: Array("two".utf8), notices: [], openedBefore: true))
        var duplicate: Error?
        do { _ = try bob.open(first, from: "alice", now: 0, using: &random) } catch { duplicate = error }
        XCTAssertEqual(duplicate as? E2EError, .duplicate, "the ratchet alone would have dropped it")
        XCTAssertEqual(try receive(try alice.seal(Array("three".utf8), to: "bob"), id: 3).plaintext, Array("three".utf8))
    }

    func testARestartThatLostTheStepDecryptsTheCopyAgain() throws {
        let before = bobStore.snapshot()
        let envelope = try alice.seal(Array("one".utf8), to: "bob")
        XCTAssertFalse(try receive(envelope, id: 1).openedBefore)
        bobStore.restore(before) // nothing of it was committed
        bob = try E2EMessenger(device: "phone", store: bobStore, using: &random)
        XCTAssertEqual(try receive(envelope, id: 1), Received(plaintext: Array("one".utf8), notices: [], openedBefore: false))
    }

    /// Only the newest `decryptedIdsKept` messages of a device are kept; an older copy is the
    /// ratchet's duplicate (the transport's receipts settled it long before).
    func testTheNewestMessagesOfADeviceAreKept() throws {
        let kept = E2EMessenger.decryptedIdsKept
        var envelopes: [[UInt8]] = []
        for id in 1...(kept + 1) {
            let envelope = try alice.seal(Array("m\(id)".utf8), to: "bob")
            envelopes.append(envelope)
            _ = try receive(envelope, id: UInt64(id))
        }
        XCTAssertTrue(try receive(envelopes[kept], id: UInt64(kept + 1)).openedBefore)
        XCTAssertTrue(try bob.hasDecrypted(2, from: "alice", device: "desk"))
        XCTAssertFalse(try bob.hasDecrypted(1, from: "alice", device: "desk"))
        XCTAssertThrowsError(try receive(envelopes[0], id: 1)) { XCTAssertEqual($0 as? E2EError, .duplicate) }
    }

    /// A list of ids written before plaintexts were kept (version 1) still reads: those ids
    /// count as decrypted, with nothing to hand over again.
    func testIdsKeptWithoutPlaintextsStillRead() throws {
        bobStore.save("decrypted/alice/desk", SecretBytes([1, 0, 2] + [UInt8](repeating: 0, count: 7) + [5] + [UInt8](repeating: 0, count: 7) + [6]))
        XCTAssertTrue(try bob.hasDecrypted(5, from: "alice", device: "desk"))
        XCTAssertTrue(try bob.hasDecrypted(6, from: "alice", device: "desk"))
        XCTAssertEqual(try receive(try alice.seal(Array("new".utf8), to: "bob"), id: 7).plaintext, Array("new".utf8))
        XCTAssertTrue(try bob.hasDecrypted(5, from: "alice", device: "desk"))
    }
}
