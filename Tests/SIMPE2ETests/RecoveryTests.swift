import SIMPE2E
import XCTest

/// A device whose state was lost or restored from a backup starts a new session, and its peer
/// is told (docs/E2E.md §7.3).
final class RecoveryTests: XCTestCase {
    private func talk(_ pair: inout Pair, rounds: Int) throws {
        for round in 0..<rounds {
            _ = try pair.bobReceives(try pair.aliceSends("a\(round)"))
            _ = try pair.aliceReceives(try pair.bobSends("b\(round)"))
        }
    }

    /// alice and bob talk, alice's store is backed up, they talk on, alice is restored from it.
    private func aliceRestoredFromABackup() throws -> Pair {
        var pair = try Pair()
        try pair.aliceStarts()
        try talk(&pair, rounds: 2)
        let backup = pair.aliceStore.snapshot()
        try talk(&pair, rounds: 3)
        pair.aliceStore.restore(backup)
        pair.alice = try E2EDevice(store: pair.aliceStore, using: &pair.random)
        return pair
    }

    func testADeviceRestoredFromABackupRecoversAndItsPeerIsTold() throws {
        var pair = try aliceRestoredFromABackup()

        try pair.aliceStarts(isRecovery: true)
        let received = try pair.bobReceives(try pair.aliceSends("I was restored"))
        XCTAssertEqual(text(received), "I was restored")
        XCTAssertEqual(received.event, .peerRestartedSession)
        try talk(&pair, rounds: 2)
    }

    func testADeviceThatLostItsSessionsButKeptItsIdentityIsNoticed() throws {
        var pair = try Pair()
        try pair.aliceStarts()
        try talk(&pair, rounds: 2)
        pair.aliceStore.remove("peer/bob")

        try pair.aliceStarts() // alice does not know she had a session
        let received = try pair.bobReceives(try pair.aliceSends("hello again"))
        XCTAssertEqual(received.event, .peerRestartedSession)
        try talk(&pair, rounds: 1)
    }

    func testAReinstalledDeviceWithANewIdentityIsReportedAsAChangedIdentity() throws {
        var pair = try Pair()
        try pair.aliceStarts()
        try talk(&pair, rounds: 1)
        let freshStore = MemoryStateStore()
        pair.alice = try E2EDevice(store: freshStore, using: &pair.random)

        try pair.aliceStarts()
        let received = try pair.bobReceives(try pair.aliceSends("new phone"))
        XCTAssertEqual(received.event, .peerIdentityChanged)
        XCTAssertEqual(try pair.bob.identity(of: "alice"), pair.alice.identity.publicKey)
    }

    func testMessagesStillInFlightFromTheEarlierSessionDecryptAfterARestart() throws {
        var pair = try Pair()
        try pair.aliceStarts()
        try talk(&pair, rounds: 1)
        let straggler = try pair.aliceSends("sent before the restart")
        try pair.aliceStarts(isRecovery: true)
        XCTAssertEqual(try pair.bobReceives(try pair.aliceSends("after")).event, .peerRestartedSession)
        XCTAssertEqual(text(try pair.bobReceives(straggler)), "sent before the restart")
        _ = try pair.aliceReceives(try pair.bobSends("both arrived"))
    }

    func testStartsThatCrossAreNotReportedAsRestarts() throws {
        var pair = try Pair()
        let aliceBundle = try pair.alice.publishBundle(oneTimePrekeys: 1, using: &pair.random)
        try pair.aliceStarts()
        try pair.bob.startSession(with: "alice", bundle: aliceBundle, using: &pair.random)
        let fromAlice = try pair.aliceSends("hi from alice")
        let fromBob = try pair.bobSends("hi from bob")
        XCTAssertNil(try pair.bobReceives(fromAlice).event)
        XCTAssertNil(try pair.aliceReceives(fromBob).event)
        try talk(&pair, rounds: 3)
    }

    func testARestoredDeviceWhoseStoreNoticesTheCopyNeverSendsOnItAndRestartsWithTheFlag() throws {
        var pair = try Pair()
        try pair.aliceStarts()
        try talk(&pair, rounds: 2)
        let backup = pair.aliceStore.snapshot()
        try talk(&pair, rounds: 3)
        pair.aliceStore.restore(backup, asCopies: true)
        pair.alice = try E2EDevice(store: pair.aliceStore, using: &pair.random)

        XCTAssertTrue(try pair.alice.sessionIsCopy(with: "bob"))
        XCTAssertThrowsError(try pair.aliceSends("would reuse a key")) { error in
            guard case E2EError.noSession = error else { return XCTFail("\(error)") }
        }
        try pair.aliceStarts(isRecovery: true)
        XCTAssertFalse(try pair.alice.sessionIsCopy(with: "bob"))
        XCTAssertEqual(try pair.bobReceives(try pair.aliceSends("restored")).event, .peerRestartedSession)
        try talk(&pair, rounds: 2)
    }

    func testARestoredDeviceSendingWithItsOldSessionIsRefusedWithoutHarmingThePeer() throws {
        var pair = try aliceRestoredFromABackup()

        for index in 0..<3 {
            XCTAssertThrows(.duplicate, try pair.bobReceives(try pair.aliceSends("stale \(index)")))
        }
        try pair.aliceStarts(isRecovery: true)
        XCTAssertEqual(try pair.bobReceives(try pair.aliceSends("recovered")).event, .peerRestartedSession)
        try talk(&pair, rounds: 2)
    }
}
