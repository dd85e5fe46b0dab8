import Foundation
import SIMPCore
import SIMPE2E
import XCTest

@testable import SIMPClient

/// What leaves before the device's end-to-end state is durable (docs/E2E.md §15): the gate's
/// decisions, and the file store's grouped commits (one journal record, all or nothing).
final class DurabilityTests: XCTestCase {
    private struct DiskFull: Error, CustomStringConvertible { var description: String { "No space left on device" } }

    private func output() -> ClientSession.Output {
        var output = ClientSession.Output()
        output.controlFrames = [
            SIMPMessage(kind: .receipt, messageId: 7, fromUser: "bob", toUser: "alice"), SIMPMessage(kind: .ping, messageId: 9),
        ]
        output.datagrams = [
            SIMPMessage(kind: .receipt, messageId: 7, fromUser: "bob", toUser: "alice"),
            SIMPMessage(kind: .text, messageId: 8, toUser: "alice").sealedEndToEnd([1, 5]),
            SIMPMessage(kind: .text, messageId: 10, toUser: "carol", content: "plain"),
        ]
        return output
    }

    func testReceiptsAndSealedMessagesWaitWhileTheStateCannotBeWritten() {
        var gate = DurabilityGate()
        XCTAssertTrue(DurabilityGate.needsCommit(output()))
        var heartbeat = ClientSession.Output()
        heartbeat.controlFrames = [SIMPMessage(kind: .ping, messageId: 9)]
        XCTAssertFalse(DurabilityGate.needsCommit(heartbeat))

        var written = output()
        XCTAssertNil(gate.committed(nil, output: &written))
        XCTAssertEqual(written, output(), "stored: everything leaves")

        var failed = output()
        XCTAssertEqual(gate.committed(DiskFull(), output: &failed), .stateUnwritable(reason: "No space left on device"))
        XCTAssertEqual(failed.controlFrames.map(\.kind), [.ping])
        XCTAssertEqual(failed.datagrams.map(\.messageId), [10], "no receipt, nothing sealed end to end")
        var again = output()
        XCTAssertNil(gate.committed(DiskFull(), output: &again), "told once")
        XCTAssertEqual(again, failed)
        var recovered = output()
        XCTAssertEqual(gate.committed(nil, output: &recovered), .stateWritableAgain)
        XCTAssertEqual(recovered, output())
        XCTAssertNil(gate.committed(nil, output: &recovered))
    }

    /// A store of `user`'s `device` under `home` that groups its saves into commits.
    private func groupingStore(_ home: URL, user: String, device: String) -> EndToEndFileStore {
        let store = EndToEndFileStore(home: home, user: user, device: device)
        store.groupsCommits = true
        return store
    }

    private func temporaryHome() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("simp-e2e-journal-\(UUID().uuidString)")
    }

    func testGroupedSavesReachTheDiskTogetherAtTheCommit() throws {
        let home = temporaryHome()
        defer { try? FileManager.default.removeItem(at: home) }
        let store = groupingStore(home, user: "bob", device: "phone")
        try store.save("peer/alice/desk", SecretBytes([1]))
        try store.save("decrypted/alice/desk", SecretBytes([2]))
        XCTAssertTrue(store.hasUncommittedChanges)
        XCTAssertEqual(try store.load("peer/alice/desk"), [1], "the process reads what it saved")
        XCTAssertNil(try EndToEndFileStore(home: home, user: "bob", device: "phone").load("peer/alice/desk"), "nothing on disk yet")

        try store.commit()
        XCTAssertFalse(store.hasUncommittedChanges)
        let reader = EndToEndFileStore(home: home, user: "bob", device: "phone")
        XCTAssertEqual(try reader.load("peer/alice/desk"), [1])
        XCTAssertEqual(try reader.load("decrypted/alice/desk"), [2])
        XCTAssertFalse(try reader.isCopy("peer/alice/desk"))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: store.directory.path), ["journal"], "one file written")
    }

    /// A record cut off by a crash in the middle of its write is not read, and the next commit
    /// writes over it.
    func testARecordCutOffByACrashIsIgnored() throws {
        let home = temporaryHome()
        defer { try? FileManager.default.removeItem(at: home) }
        let store = groupingStore(home, user: "bob", device: "phone")
        try store.save("peer/alice/desk", SecretBytes([1]))
        try store.commit()
        try store.save("peer/alice/desk", SecretBytes([2]))
        try store.commit()
        let journal = store.directory.appendingPathComponent("journal")
        var bytes = try Data(contentsOf: journal)
        bytes.removeLast(3)
        try bytes.write(to: journal)

        let restarted = groupingStore(home, user: "bob", device: "phone")
        XCTAssertEqual(try restarted.load("peer/alice/desk"), [1], "the last record is cut off: the one before holds")
        try restarted.save("peer/alice/desk", SecretBytes([3]))
        try restarted.commit()
        XCTAssertEqual(try EndToEndFileStore(home: home, user: "bob", device: "phone").load("peer/alice/desk"), [3])
    }

    /// A commit that cannot be written leaves nothing on disk, keeps the changes, and writes
    /// them all once it can.
    func testACommitThatFailsIsWrittenLater() throws {
        let home = temporaryHome()
        defer { try? FileManager.default.removeItem(at: home) }
        let store = groupingStore(home, user: "bob", device: "phone")
        try SIMPHome.makeDirectory(store.directory.appendingPathComponent("journal")) // in the journal's way
        try store.save("peer/alice/desk", SecretBytes([1]))
        XCTAssertThrowsError(try store.commit())
        XCTAssertTrue(store.hasUncommittedChanges)
        try FileManager.default.removeItem(at: store.directory.appendingPathComponent("journal"))
        try store.save("decrypted/alice/desk", SecretBytes([2]))
        try store.commit()
        let reader = EndToEndFileStore(home: home, user: "bob", device: "phone")
        XCTAssertEqual(try reader.load("peer/alice/desk"), [1])
        XCTAssertEqual(try reader.load("decrypted/alice/desk"), [2])
    }

    /// A journal past its size is folded into one file per name, each with its inode (so a
    /// copy is still told, docs/E2E.md §7.3), and starts empty again; so does the journal an
    /// earlier process left, at the next process's first commit.
    func testTheJournalIsFoldedIntoTheFiles() throws {
        let home = temporaryHome()
        defer { try? FileManager.default.removeItem(at: home) }
        let store = groupingStore(home, user: "bob", device: "phone")
        try store.save("peer/alice/desk", SecretBytes([1]))
        try store.commit()
        let next = groupingStore(home, user: "bob", device: "phone")
        next.checkpointBytes = 20
        try next.save("identity", SecretBytes([9]))
        try next.commit()
        let files = try FileManager.default.contentsOfDirectory(atPath: store.directory.path).sorted()
        XCTAssertEqual(files, ["identity", "journal", "peer%2Falice%2Fdesk"])
        let journal = try Data(contentsOf: store.directory.appendingPathComponent("journal"))
        XCTAssertEqual(journal.count, 9, "the header only")
        let reader = EndToEndFileStore(home: home, user: "bob", device: "phone")
        XCTAssertEqual(try reader.load("peer/alice/desk"), [1])
        XCTAssertEqual(try reader.load("identity"), [9])
        XCTAssertFalse(try reader.isCopy("peer/alice/desk"))
    }

    /// With end to end the outbox's records go into the device's journal: the messages of a
    /// burst and the ratchet steps that sealed them reach the disk in one record (one fsync),
    /// the outbox's own log is not written; a checkpoint folds them into the log, and so does
    /// the next process's first commit (even one without an outbox of its own).
    func testTheOutboxAndTheStateAreMadeDurableByOneJournalCommit() throws {
        let home = temporaryHome()
        defer { try? FileManager.default.removeItem(at: home) }
        let store = groupingStore(home, user: "alice", device: "desk")
        let outbox = try Outbox(home: home, user: "alice", device: "desk")
        outbox.usingJournal(store)
        let first = SIMPMessage(kind: .text, messageId: 7, fromUser: "alice", toUser: "bob").sealedEndToEnd([1, 5])
        let second = SIMPMessage(kind: .text, messageId: 8, fromUser: "alice", toUser: "bob").sealedEndToEnd([2, 6])
        try store.save("peer/bob/phone", SecretBytes([1]))
        try outbox.save(first)
        XCTAssertEqual(try Outbox(home: home, user: "alice", device: "desk").count, 0, "nothing is durable before the sync")
        XCTAssertTrue(store.hasUncommittedChanges)

        try outbox.sync()
        XCTAssertFalse(store.hasUncommittedChanges, "the state went with the outbox's records: nothing left for a second fsync")
        let log = outbox.directory.appendingPathComponent("outbox.log")
        XCTAssertFalse(FileManager.default.fileExists(atPath: log.path), "the outbox's log is not written at all")
        XCTAssertEqual(try Outbox(home: home, user: "alice", device: "desk").load().messages, [first])
        XCTAssertEqual(try EndToEndFileStore(home: home, user: "alice", device: "desk").load("peer/bob/phone"), [1])

        outbox.remove(first.messageId)
        XCTAssertEqual(try Outbox(home: home, user: "alice", device: "desk").count, 0, "a message settled leaves at once (written, not synced)")
        try outbox.save(second)
        store.checkpointBytes = 0
        try outbox.sync() // past its size: the journal is folded into the files and the log
        XCTAssertEqual(try Data(contentsOf: store.directory.appendingPathComponent("journal")).count, 9, "the header only")
        XCTAssertTrue(FileManager.default.fileExists(atPath: log.path))
        XCTAssertEqual(try Outbox(home: home, user: "alice", device: "desk").load().messages, [second])

        outbox.remove(second.messageId)
        try outbox.save(first)
        store.checkpointBytes = 512 * 1024
        try outbox.sync()
        XCTAssertEqual(
            try Outbox(home: home, user: "alice", device: "desk").load().messages, [first], "the journal's records are newer than the log's")
        let next = EndToEndFileStore(home: home, user: "alice", device: "desk") // the next process, no outbox attached
        next.groupsCommits = true
        try next.save("identity", SecretBytes([9]))
        try next.commit()
        XCTAssertTrue(EndToEndFileStore.outboxRecords(inJournalIn: store.directory).isEmpty, "folded at its first commit")
        XCTAssertEqual(try Outbox(home: home, user: "alice", device: "desk").load().messages, [first], "into the outbox's log")
    }

    /// The device's directory moved away while its journal is open: a commit there would be
    /// where no later process looks, so it fails (and the changes wait) instead.
    func testAJournalMovedWhileInUseIsNotWritten() throws {
        let home = temporaryHome()
        defer { try? FileManager.default.removeItem(at: home) }
        let store = groupingStore(home, user: "bob", device: "phone")
        try store.save("peer/alice/desk", SecretBytes([1]))
        try store.commit()
        try FileManager.default.moveItem(at: store.directory, to: store.directory.appendingPathExtension("aside"))
        try store.save("peer/alice/desk", SecretBytes([2]))
        XCTAssertThrowsError(try store.commit())
        XCTAssertTrue(store.hasUncommittedChanges, "kept to be written again")
    }
}
