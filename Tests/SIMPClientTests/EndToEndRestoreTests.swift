import Foundation
import NIOCore
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// A device restored from a backup of `$SIMP_HOME` that kept its sessions, with a real relay and
/// Redis (docs/E2E.md §7.5): what it sends reuses message keys, and what its peer sends
/// it no longer decrypts. The receiver asks for the message again on a new session; it arrives
/// once, and both users are told.
final class EndToEndRestoreTests: EndToEndRelayTestCase {
    private let (alice, bob) = (TestRelay.uniqueUser("alice"), TestRelay.uniqueUser("bob"))

    private func send(_ text: String, from client: SIMPClient, to peer: String, arrivingIn inbox: MessageInbox) async throws {
        let before = await inbox.messages.count
        guard case .delivered = try await client.send(text: text, to: peer) else { return XCTFail("\(text): not delivered") }
        let arrived = await inbox.waitFor(before + 1)
        XCTAssertTrue(arrived, text)
    }

    /// How a backup is put back: as a disk snapshot would (every file as it was, with the inode
    /// it had: the store cannot tell), or as copies of the files (it can, docs/E2E.md §7.3).
    private enum Restore { case asASnapshot, byCopy }

    /// alice and bob talk; alice's device is backed up (its key store directory copied), they
    /// talk on, and the device is restored from the copy. Returns alice's restored client and
    /// bob's, with their inboxes.
    private func restoreAliceFromABackup(_ restore: Restore = .asASnapshot) async throws -> (SIMPClient, MessageInbox, SIMPClient, MessageInbox) {
        let bobClient = try await connectEndToEnd(bob, device: "phone")
        let bobInbox = MessageInbox(bobClient)
        var aliceClient = try await connectEndToEnd(alice, device: "desk")
        var aliceInbox = MessageInbox(aliceClient)
        try await send("one", from: aliceClient, to: bob, arrivingIn: bobInbox)
        try await send("reply one", from: bobClient, to: alice, arrivingIn: aliceInbox)

        let store = EndToEndFileStore(home: home, user: alice, device: "desk").directory
        let backup = home.appendingPathComponent("backup")
        try FileManager.default.copyItem(at: store, to: backup)
        try await send("two", from: aliceClient, to: bob, arrivingIn: bobInbox)
        try await send("reply two", from: bobClient, to: alice, arrivingIn: aliceInbox)
        try await send("three", from: aliceClient, to: bob, arrivingIn: bobInbox)

        await aliceClient.close()
        switch restore {
        case .byCopy:
            try FileManager.default.removeItem(at: store)
            try FileManager.default.copyItem(at: backup, to: store)
        case .asASnapshot:
            try FileManager.default.removeItem(at: store)
            try FileManager.default.copyItem(at: backup, to: store)
            // A snapshot brings back the inodes too: each file records its own, as when it was written.
            for file in try FileManager.default.contentsOfDirectory(atPath: store.path) {
                let url = store.appendingPathComponent(file)
                let inode = try XCTUnwrap(FileManager.default.attributesOfItem(atPath: url.path)[.systemFileNumber] as? NSNumber).uint64Value
                var bytes = try Data(contentsOf: url)
                bytes.replaceSubrange(1..<9, with: (0..<8).map { UInt8(truncatingIfNeeded: inode >> (56 - 8 * UInt64($0))) })
                let handle = try FileHandle(forWritingTo: url)
                try handle.write(contentsOf: bytes)
                try handle.close()
            }
        }
        aliceClient = try await connectEndToEnd(alice, device: "desk")
        aliceInbox = MessageInbox(aliceClient)
        return (aliceClient, aliceInbox, bobClient, bobInbox)
    }

    private func texts(_ inbox: MessageInbox) async -> [String] { await inbox.messages.map(\.content) }

    func testAMessageFromARestoredDeviceArrivesOnceAndBothUsersAreTold() async throws {
        let (aliceClient, aliceInbox, bobClient, bobInbox) = try await restoreAliceFromABackup()
        let (aliceNotices, bobNotices) = (EndToEndNoticeLog(aliceClient), EndToEndNoticeLog(bobClient))
        let (alice, bob) = (alice, bob)

        guard case .delivered = try await aliceClient.send(text: "after the restore", to: bob) else { return XCTFail("not delivered") }
        let arrived = await bobInbox.waitFor(4)
        XCTAssertTrue(arrived)
        let bobAsked = await bobNotices.waitFor { if case .askedAgain(alice, "desk", _) = $0 { true } else { false } }
        let aliceToldResent = await aliceNotices.waitFor { if case .resent(bob, "phone", _, true) = $0 { true } else { false } }
        let (bobSaid, aliceSaid) = (await bobNotices.notices, await aliceNotices.notices)
        XCTAssertTrue(bobAsked, "\(bobSaid)")
        XCTAssertTrue(aliceToldResent, "\(aliceSaid)")

        // The conversation goes on, on the new session, both ways.
        try await send("welcome back", from: bobClient, to: alice, arrivingIn: aliceInbox)
        try await send("thanks", from: aliceClient, to: bob, arrivingIn: bobInbox)
        _ = await Eventually.stays(for: .seconds(1)) { // quiet period: room for a duplicate, if any
            let (toBob, toAlice) = (await bobInbox.messages.count, await aliceInbox.messages.count)
            return toBob == 5 && toAlice == 1
        }
        let received = await texts(bobInbox)
        XCTAssertEqual(received, ["one", "two", "three", "after the restore", "thanks"], "once each, nothing lost")
        let aliceReceived = await texts(aliceInbox)
        XCTAssertEqual(aliceReceived, ["welcome back"])
        let said = await bobNotices.notices
        XCTAssertEqual(said.filter { if case .askedAgain = $0 { true } else { false } }.count, 1, "\(said)")
        XCTAssertFalse(said.contains { if case .undecryptable = $0 { true } else { false } }, "\(said)")
    }

    /// Restored by copying the files back, the device notices (each file records its inode):
    /// its first message starts a new session flagged as a recovery, so no key is used twice and
    /// nothing needs asking for again; bob is told alice's device started a new session.
    func testADeviceRestoredByCopyingItsFilesStartsANewSessionBeforeSending() async throws {
        let (aliceClient, _, bobClient, bobInbox) = try await restoreAliceFromABackup(.byCopy)
        let (aliceNotices, bobNotices) = (EndToEndNoticeLog(aliceClient), EndToEndNoticeLog(bobClient))
        let (alice, bob) = (alice, bob)

        try await send("after the restore", from: aliceClient, to: bob, arrivingIn: bobInbox)
        let told = await bobNotices.waitFor { $0 == .peer(.sessionRestarted(user: alice, device: "desk")) }
        try await send("and again", from: aliceClient, to: bob, arrivingIn: bobInbox)
        let said = await bobNotices.notices
        XCTAssertTrue(told, "\(said)")
        XCTAssertFalse(said.contains { if case .askedAgain = $0 { true } else { false } }, "no key used twice: \(said)")
        let aliceSaid = await aliceNotices.notices
        XCTAssertEqual(aliceSaid, [.restoredSessionReplaced(user: bob, device: "phone")])
        let received = await texts(bobInbox)
        XCTAssertEqual(received, ["one", "two", "three", "after the restore", "and again"])
    }

    func testARestoredDeviceGetsAgainAMessageItCouldNotDecrypt() async throws {
        let (aliceClient, aliceInbox, bobClient, bobInbox) = try await restoreAliceFromABackup(.byCopy)
        let (aliceNotices, bobNotices) = (EndToEndNoticeLog(aliceClient), EndToEndNoticeLog(bobClient))
        let (alice, bob) = (alice, bob)

        guard case .delivered = try await bobClient.send(text: "to the restored device", to: alice) else { return XCTFail("not delivered") }
        let arrived = await aliceInbox.waitFor(1)
        XCTAssertTrue(arrived)
        let aliceAsked = await aliceNotices.waitFor { if case .askedAgain(bob, "phone", _) = $0 { true } else { false } }
        let bobToldResent = await bobNotices.waitFor { if case .resent(alice, "desk", _, true) = $0 { true } else { false } }
        let (aliceSaid, bobSaid) = (await aliceNotices.notices, await bobNotices.notices)
        XCTAssertTrue(aliceAsked, "\(aliceSaid)")
        XCTAssertTrue(bobToldResent, "\(bobSaid)")

        try await send("and back", from: aliceClient, to: bob, arrivingIn: bobInbox)
        let bobCount = await bobInbox.messages.count
        _ = await Eventually.stays(for: .seconds(1)) { // quiet period: room for a duplicate, if any
            let (toAlice, toBob) = (await aliceInbox.messages.count, await bobInbox.messages.count)
            return toAlice == 1 && toBob == bobCount
        }
        let aliceReceived = await texts(aliceInbox)
        XCTAssertEqual(aliceReceived, ["to the restored device"], "once, nothing lost")
        let bobReceived = await texts(bobInbox)
        XCTAssertEqual(bobReceived.last, "and back")
    }
}
