import SIMPE2E
import XCTest

/// A device restored from a backup that kept its sessions: what it sends reuses message keys,
/// and what it receives from a peer whose ratchet moved on does not decrypt. The receiver asks
/// for the message again on a new session and gets it (docs/E2E.md §7.5).
final class ResendTests: XCTestCase {
    private var random = SeededRandom(seed: 27)
    private let aliceStore = MemoryStateStore()
    private var alice: E2EMessenger!
    private var bob: E2EMessenger!

    override func setUpWithError() throws {
        alice = try E2EMessenger(device: "desk", store: aliceStore, using: &random)
        bob = try E2EMessenger(device: "laptop", store: MemoryStateStore(), using: &random)
        _ = try alice.updateDevices(of: "bob", bundles: [("laptop", try bundle(&bob))], using: &random)
    }

    /// The bundle the relay hands out for `device` (no one-time prekey: the peer knows it).
    private func bundle(_ device: inout E2EMessenger) throws -> KeyBundle {
        device.local.prekeys.bundle(identity: device.local.identity, oneTimePrekeys: [])
    }

    private func open(_ envelope: [UInt8], at receiver: inout E2EMessenger, from peer: String) throws -> String {
        String(decoding: try receiver.open(envelope, from: peer, now: 0, using: &random).plaintext, as: UTF8.self)
    }

    private func talk(rounds: Int) throws {
        for round in 0..<rounds {
            XCTAssertEqual(try open(try alice.seal(Array("a\(round)".utf8), to: "bob"), at: &bob, from: "alice"), "a\(round)")
            XCTAssertEqual(try open(try bob.seal(Array("b\(round)".utf8), to: "alice"), at: &alice, from: "bob"), "b\(round)")
        }
    }

    /// alice and bob talk, alice's store is backed up, they talk on, alice is restored from it.
    private func restoreAliceFromABackup() throws {
        try talk(rounds: 2)
        let backup = aliceStore.snapshot()
        try talk(rounds: 3)
        aliceStore.restore(backup)
        alice = try E2EMessenger(device: "desk", store: aliceStore, using: &random)
    }

    func testAMessageFromARestoredSenderIsAskedForAgainAndArrivesOnANewSession() throws {
        try restoreAliceFromABackup()
        let lost = Array("sent after the restore".utf8)
        var failure: Error?
        do { _ = try bob.open(try alice.seal(lost, to: "bob"), from: "alice", now: 0, using: &random) } catch { failure = error }
        XCTAssertEqual(failure as? E2EError, .duplicate, "the restored chain reuses a message number")
        XCTAssertTrue(E2EMessenger.isRecoverable(failure!))

        // bob asks alice's device on a new session; alice sends the message again to bob's laptop only.
        let request = try bob.sealResendRequest(for: 4242, to: "alice", device: "desk", newSessionFrom: try bundle(&alice), using: &random)
        let opened = try alice.open(request, from: "bob", now: 0, using: &random)
        XCTAssertTrue(ResendRequest.isResendRequest(opened.plaintext))
        XCTAssertEqual(try ResendRequest(encoded: opened.plaintext).messageId, 4242)
        let again = try alice.seal(lost, to: "bob", device: "laptop")
        XCTAssertEqual(try E2EEnvelope(encoded: again).copies.map(\.device), ["laptop"])
        XCTAssertEqual(try open(again, at: &bob, from: "alice"), "sent after the restore")
        try talk(rounds: 2) // the new session carries on in both directions
    }

    func testARestoredReceiverAsksForAMessageItCannotDecryptAndGetsIt() throws {
        try restoreAliceFromABackup()
        let lost = Array("sent to the restored device".utf8)
        var failure: Error?
        do { _ = try alice.open(try bob.seal(lost, to: "alice"), from: "bob", now: 0, using: &random) } catch { failure = error }
        XCTAssertEqual(failure as? E2EError, .authenticationFailed, "bob's ratchet moved on past the backup")
        XCTAssertTrue(E2EMessenger.isRecoverable(failure!))

        let request = try alice.sealResendRequest(for: 77, to: "bob", device: "laptop", newSessionFrom: try bundle(&bob), using: &random)
        let opened = try bob.open(request, from: "alice", now: 0, using: &random)
        XCTAssertEqual(try ResendRequest(encoded: opened.plaintext), ResendRequest(messageId: 77))
        XCTAssertEqual(try open(try bob.seal(lost, to: "alice", device: "desk"), at: &alice, from: "bob"), "sent to the restored device")
        try talk(rounds: 2)
    }

    func testARequestOnTheSessionJustStartedNeedsNoOtherNewSession() throws {
        try restoreAliceFromABackup()
        let first = try alice.seal(Array("one".utf8), to: "bob"), second = try alice.seal(Array("two".utf8), to: "bob")
        XCTAssertThrows(.duplicate, try bob.open(first, from: "alice", now: 0, using: &random))
        XCTAssertThrows(.duplicate, try bob.open(second, from: "alice", now: 0, using: &random))
        let askFirst = try bob.sealResendRequest(for: 1, to: "alice", device: "desk", newSessionFrom: try bundle(&alice), using: &random)
        let askSecond = try bob.sealResendRequest(for: 2, to: "alice", device: "desk", newSessionFrom: nil, using: &random)
        XCTAssertEqual(try ResendRequest(encoded: try alice.open(askSecond, from: "bob", now: 0, using: &random).plaintext).messageId, 2)
        XCTAssertEqual(try ResendRequest(encoded: try alice.open(askFirst, from: "bob", now: 0, using: &random).plaintext).messageId, 1)
        XCTAssertEqual(try open(try alice.seal(Array("one".utf8), to: "bob", device: "laptop"), at: &bob, from: "alice"), "one")
        XCTAssertEqual(try open(try alice.seal(Array("two".utf8), to: "bob", device: "laptop"), at: &bob, from: "alice"), "two")
    }

    func testTheIdsOfDecryptedMessagesAreKeptAcrossAReloadAndBounded() throws {
        let store = MemoryStateStore()
        let laptop = try E2EMessenger(device: "laptop", store: store, using: &random)
        for id in 1...UInt64(E2EMessenger.decryptedIdsKept + 1) { try laptop.noteDecrypted(id, from: "alice", device: "desk") }
        let reloaded = try E2EMessenger(device: "laptop", store: store, using: &random)
        XCTAssertTrue(try reloaded.hasDecrypted(UInt64(E2EMessenger.decryptedIdsKept + 1), from: "alice", device: "desk"))
        XCTAssertFalse(try reloaded.hasDecrypted(1, from: "alice", device: "desk"), "the oldest went")
        XCTAssertFalse(try reloaded.hasDecrypted(2, from: "alice", device: "phone"), "per device")
    }

    func testAResendRequestRoundTripsAndIsToldFromAMessage() throws {
        XCTAssertEqual(ResendRequest(messageId: 0x0102_0304_0506_0708).encoded, [1, 6, 1, 2, 3, 4, 5, 6, 7, 8])
        XCTAssertThrowsError(try ResendRequest(encoded: [1, 6, 1, 2, 3]))
        XCTAssertThrowsError(try ResendRequest(encoded: [1, 6, 1, 2, 3, 4, 5, 6, 7, 8, 9]))
        XCTAssertFalse(ResendRequest.isResendRequest(Array("hello".utf8)))
        XCTAssertFalse(E2EMessenger.isRecoverable(E2EError.malformed("x")))
    }
}
