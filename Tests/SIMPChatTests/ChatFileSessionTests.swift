import SIMPChat
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// `/file` in the chat's state machine: the file's line, its progress rewritten in place as
/// the mark, then ✓✓ on the same line; failures say why; `/retry` sends a failed file again.
final class ChatFileSessionTests: XCTestCase, ChatSessionDriving {
    var session: ChatSession!
    var terminal = VirtualTerminal(width: 140, height: 8)
    var decoder = KeyDecoder()

    func testAFileLineShowsItsProgressInPlaceThenDelivered() {
        startSession()
        let asked = type("/file /tmp/my report.pdf\r")
        XCTAssertEqual(asked, [.checkFile(path: "/tmp/my report.pdf", to: "bob", image: false)])
        let file = ChatFile(path: "/tmp/my report.pdf", name: "my report.pdf", size: 2_500_000)
        let started = session.fileChecked(to: "bob", .success(file))
        refresh()
        XCTAssertEqual(started.last, .sendFile(ref: 0, file, to: "bob"), "after its history record (ChatFileHistoryTests)")
        XCTAssertEqual(terminal.transcript.suffix(2), ["12:00 you → bob: [file] my report.pdf (2.5 MB) …", "bob>"])

        session.fileProgress(ref: 0, "1.0 MB of 2.5 MB, 2.0 MB/s, ETA 0.8 s (sent 1.1 MB)")
        refresh()
        XCTAssertEqual(
            terminal.transcript.suffix(2),
            ["12:00 you → bob: [file] my report.pdf (2.5 MB) 1.0 MB of 2.5 MB, 2.0 MB/s, ETA 0.8 s (sent 1.1 MB)", "bob>"])
        _ = session.resolved(ref: 0, .delivered(latencyMillis: 1200))
        session.fileProgress(ref: 0, "2.5 MB of 2.5 MB, 2.1 MB/s, ETA 0.0 s (sent 2.5 MB)") // late: the outcome stays
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(2), ["12:00 you → bob: [file] my report.pdf (2.5 MB) ✓✓", "bob>"], "the same line, rewritten")
    }

    func testQuittingDuringATransferSaysTheFileStops() {
        startSession()
        _ = session.fileChecked(to: "bob", .success(ChatFile(path: "/tmp/a.bin", name: "a.bin", size: 5_000)))
        XCTAssertEqual(type("/quit\r"), [])
        XCTAssertEqual(
            terminal.transcript.suffix(2).first,
            "-- 1 file still being sent; /quit again to stop it (/retry in a later chat, or the same /file to the same person, goes on where it stopped)"
        )
        XCTAssertEqual(type("/quit\r"), [.quit(status: 0)])
    }

    func testAFailedFileSaysWhyAndRetryChecksItAgain() {
        startSession()
        let image = ChatFile(path: "/p/cat.png", name: "cat.png", size: 52_100, image: ImageDimensions(format: "PNG", width: 640, height: 480))
        _ = session.fileChecked(to: "bob", .success(image))
        _ = session.resolved(ref: 0, .failed("the receiver refused the file: too large"))
        refresh()
        XCTAssertEqual(
            terminal.transcript.suffix(2),
            ["12:00 you → bob: [image] cat.png 640×480 (52.1 kB) ✗ the receiver refused the file: too large (/retry resends)", "bob>"])
        XCTAssertEqual(
            type("/retry\r"),
            [
                .recordStatus(messageId: ChatSession.fileEntryId(time: 1_000, ref: 0), status: "retried"),
                .checkFile(path: "/p/cat.png", to: "bob", image: true),
            ])

        _ = session.fileChecked(to: "bob", .failure(ChatRoomError("no such file: /p/dog.png")))
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(2), ["-- no such file: /p/dog.png", "bob>"])
    }

    func testFilesNeedSomeoneAndInARoomCountTheMembersWhoHaveThem() {
        startSession(peer: nil)
        XCTAssertEqual(type("/file /tmp/a\r"), [])
        XCTAssertEqual(terminal.transcript.suffix(2).first, "-- no one to send to: type /to NAME first, then /file PATH")
        type("/to #lobby\r")
        XCTAssertEqual(type("/file /tmp/a.bin\r"), [.checkFile(path: "/tmp/a.bin", to: "#lobby", image: false)])
        let file = ChatFile(path: "/tmp/a.bin", name: "a.bin", size: 2_000)
        XCTAssertEqual(session.fileChecked(to: "#lobby", .success(file)).last, .sendFile(ref: 0, file, to: "#lobby"))
        _ = session.resolved(ref: 0, .roomDelivered(1, of: 2))
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(2).first, "12:00 you → #lobby: [file] a.bin (2.0 kB) ✓ 1/2")
        _ = session.resolved(ref: 0, .roomDelivered(2, of: 2))
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(2).first, "12:00 you → #lobby: [file] a.bin (2.0 kB) ✓✓ 2/2")
    }

    /// A room file for three members: carol had it live; the relay holds it for bob and dave.
    /// The mark counts only carol (✓ 1/3, before: ✓✓ 3/3 as soon as the relay held it), then
    /// each member whose device the relay says has it, once (a second device changes nothing):
    /// ✓ 2/3, ✓✓ 3/3. News that came before the send ended is counted when it ends.
    func testARoomFileCountsTheMembersTheRelayHoldsItForOnceTheirDevicesHaveIt() {
        startSession(peer: "#lobby")
        let file = ChatFile(path: "/tmp/a.bin", name: "a.bin", size: 2_000)
        _ = session.fileChecked(to: "#lobby", .success(file))
        let held: [String: UInt64] = ["bob": 41, "dave": 41]
        XCTAssertEqual(recordedStatus(session.roomFileHeld(ref: 0, heldFor: held, delivered: 1, of: 3)), "delivered 1/3")
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(2).first, "12:00 you → #lobby: [file] a.bin (2.0 kB) ✓ 1/3")
        XCTAssertEqual(recordedStatus(session.noticed(.fileReceived(fileId: 41, by: "bob", device: "phone"))), "delivered 2/3")
        XCTAssertEqual(session.noticed(.fileReceived(fileId: 41, by: "bob", device: "laptop")), [], "bob counted once")
        XCTAssertEqual(session.noticed(.fileReceived(fileId: 41, by: "mallory", device: "phone")), [], "not a member it was held for")
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(2).first, "12:00 you → #lobby: [file] a.bin (2.0 kB) ✓ 2/3")
        XCTAssertEqual(recordedStatus(session.noticed(.fileReceived(fileId: 41, by: "dave", device: "phone"))), "delivered 3/3")
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(2).first, "12:00 you → #lobby: [file] a.bin (2.0 kB) ✓✓ 3/3")

        // bob's device had the second file before the send ended.
        _ = session.fileChecked(to: "#lobby", .success(ChatFile(path: "/tmp/b.bin", name: "b.bin", size: 3_000)))
        XCTAssertEqual(session.noticed(.fileReceived(fileId: 42, by: "bob", device: "phone")), [])
        XCTAssertEqual(recordedStatus(session.roomFileHeld(ref: 1, heldFor: ["bob": 42, "dave": 42], delivered: 1, of: 3)), "delivered 2/3")
    }

    /// The status the last `.recordStatus` among `effects` records.
    private func recordedStatus(_ effects: [ChatEffect]) -> String? {
        effects.compactMap { effect -> String? in
            guard case .recordStatus(_, let status) = effect else { return nil }
            return status
        }.last
    }

    func testAReceivedFileIsAnnouncedThenShownSaved() {
        startSession()
        var announcement = SIMPMessage(kind: .text, toUser: "alice", content: "cat.png")
        announcement.fromUser = "bob"
        announcement.fileId = 7
        announcement.fileSize = 52_100
        announcement.e2ePayload = [1] // came end to end encrypted
        _ = session.receive(announcement)
        _ = session.fileSaved(
            from: "bob", ChatFile(path: "/d/cat.png", name: "cat.png", size: 52_100, image: ImageDimensions(format: "PNG", width: 640, height: 480)))
        session.fileNotReceived("big.iso from bob (5000000000 bytes) is larger than 4294967296 bytes: refused")
        refresh()
        XCTAssertEqual(
            terminal.transcript.suffix(4),
            [
                "-- bob is sending cat.png (52.1 kB)", "12:00 bob: [image] cat.png 640×480 (52.1 kB) saved to /d/cat.png",
                "-- file not received: big.iso from bob (5000000000 bytes) is larger than 4294967296 bytes: refused", "bob>",
            ])

        // From someone else than the current peer: counted in the prompt, and the bell rings.
        announcement.fromUser = "carol"
        announcement.fileId = 8
        _ = session.receive(announcement)
        let output = session.takeOutput()
        terminal.feed(output)
        XCTAssertTrue(output.contains("\u{7}"), "the bell rings for a file from someone else")
        XCTAssertEqual(terminal.transcript.suffix(2), ["-- carol is sending cat.png (52.1 kB)", "[carol 1] bob>"])

        // With no one to talk to, its sender is the one replies go to.
        terminal = VirtualTerminal(width: 140, height: 8)
        startSession(peer: nil)
        XCTAssertEqual(session.receive(announcement), [.who(users: ["carol"], room: nil, show: false)])
        refresh()
        XCTAssertEqual(
            terminal.transcript.suffix(3),
            ["-- carol is sending cat.png (52.1 kB)", "-- replies go to carol (/to NAME to talk to someone else)", "carol>"])
    }
}

/// Files in the history: a file sent is recorded with its outcome, a file received with where
/// it was saved; both are shown when the chat starts again, and `/retry` offers a file that
/// failed or was stopped before the end.
final class ChatFileHistoryTests: XCTestCase, ChatSessionDriving {
    var session: ChatSession!
    var terminal = VirtualTerminal(width: 140, height: 12)
    var decoder = KeyDecoder()

    func testASentFileIsRecordedWithItsOutcomeAndShownWhenTheChatStartsAgain() throws {
        startSession()
        type("/image /p/cat.png\r")
        let image = ChatFile(path: "/p/cat.png", name: "cat.png", size: 52_100, image: ImageDimensions(format: "PNG", width: 640, height: 480))
        let started = session.fileChecked(to: "bob", .success(image))
        guard case .record(var entry)? = started.first else { return XCTFail("\(started)") }
        XCTAssertEqual(started.dropFirst(), [.sendFile(ref: 0, image, to: "bob")])
        XCTAssertEqual(entry.kind, "file")
        XCTAssertEqual(entry.status, "sending", "until its outcome")
        XCTAssertEqual(entry.file, HistoryFile(name: "cat.png", size: 52_100, width: 640, height: 480, path: "/p/cat.png"))
        XCTAssertEqual([entry.from, entry.to], ["alice", "bob"])
        XCTAssertGreaterThanOrEqual(entry.id, 1 << 63, "no message id of the client's can take it")

        session.fileProgress(ref: 0, "0.1 MB of 0.1 MB")
        XCTAssertEqual(session.resolved(ref: 0, .delivered(latencyMillis: 80)), [.recordStatus(messageId: entry.id, status: "delivered")])
        entry.status = "delivered"
        var room = HistoryEntry(id: 9, time: 1, from: "alice", to: "#lobby", kind: "file", text: "", status: "delivered 2/2")
        room.file = HistoryFile(name: "notes.txt", size: 2_000, path: "/p/notes.txt")

        terminal = VirtualTerminal(width: 140, height: 12) // the chat started again
        startSession(history: [entry, room])
        XCTAssertEqual(
            Array(terminal.transcript.prefix(3)),
            [
                "-- last 2 of 2 messages; /history shows older ones", "12:00 you → bob: [image] cat.png 640×480 (52.1 kB) ✓✓",
                "12:00 you → #lobby: [file] notes.txt (2.0 kB) ✓✓ 2/2",
            ])
        XCTAssertEqual(type("/retry\r"), [], "nothing failed")
    }

    /// A file the relay held for bob (✓ (stored)) keeps its id in the history; the relay's news
    /// that bob got it turns the line ✓✓ in place, and in a chat started again (the news came
    /// while it was closed) shows the line again with ✓✓ and records it once. News about a file
    /// the chat does not know yet (it came before the transfer's end) is kept for it.
    func testAStoredFileTurnsDeliveredWhenTheReceiverGotItAlsoInALaterChat() throws {
        startSession()
        let file = ChatFile(path: "/p/a.bin", name: "a.bin", size: 2_000)
        guard case .record(var entry)? = session.fileChecked(to: "bob", .success(file)).first else { return XCTFail() }
        var held = HistoryFile(name: "a.bin", size: 2_000, path: "/p/a.bin")
        held.fileId = 77
        XCTAssertEqual(
            session.fileStored(ref: 0, fileId: 77),
            [.recordFile(messageId: entry.id, from: "alice", held), .recordStatus(messageId: entry.id, status: "stored")])
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(2).first, "12:00 you → bob: [file] a.bin (2.0 kB) ✓ (stored)")
        XCTAssertEqual(session.noticed(.fileReceived(fileId: 77, by: "carol", device: "phone")), [], "not carol's file")
        XCTAssertEqual(
            session.noticed(.fileReceived(fileId: 77, by: "bob", device: "phone")), [.recordStatus(messageId: entry.id, status: "delivered")])
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(2).first, "12:00 you → bob: [file] a.bin (2.0 kB) ✓✓")
        XCTAssertEqual(session.noticed(.fileReceived(fileId: 77, by: "bob", device: "laptop")), [], "a second device changes nothing")

        // The news arrives while the chat is closed: the next chat shows it.
        (entry.file, entry.status) = (held, "stored")
        terminal = VirtualTerminal(width: 140, height: 12)
        startSession(history: [entry])
        XCTAssertEqual(terminal.transcript.dropFirst().first, "12:00 you → bob: [file] a.bin (2.0 kB) ✓ (stored)")
        XCTAssertEqual(
            session.noticed(.fileReceived(fileId: 77, by: "bob", device: "phone")), [.recordStatus(messageId: entry.id, status: "delivered")])
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(2).first, "12:00 you → bob: [file] a.bin (2.0 kB) ✓✓")
        XCTAssertEqual(session.noticed(.fileReceived(fileId: 77, by: "bob", device: "phone")), [], "recorded once")

        // The receiver had the file before the sender's transfer ended.
        XCTAssertEqual(session.noticed(.fileReceived(fileId: 78, by: "bob", device: "phone")), [])
        _ = session.fileChecked(to: "bob", .success(ChatFile(path: "/p/b.bin", name: "b.bin", size: 3_000)))
        let id = ChatSession.fileEntryId(time: 1_000, ref: 0)
        XCTAssertEqual(session.fileStored(ref: 0, fileId: 78).last, .recordStatus(messageId: id, status: "delivered"))
    }

    func testAReceivedFileIsRecordedWhereItWasSavedAndShownWhenTheChatStartsAgain() throws {
        startSession()
        var announcement = SIMPMessage(kind: .text, toUser: "alice", content: "cat.png")
        announcement.fromUser = "bob"
        announcement.messageId = 41
        announcement.fileId = 7
        announcement.fileSize = 52_100
        announcement.fileDigest = [0xAB, 0x01]
        announcement.fileKey = Array(repeating: 0x5A, count: 32)
        announcement.e2ePayload = [1] // came end to end encrypted
        var recorded = HistoryEntry(received: announcement)
        XCTAssertEqual(recorded.kind, "file")
        XCTAssertEqual(recorded.file, HistoryFile(name: "cat.png", size: 52_100, sha256: "ab01"), "its name, size and digest; never its key")
        var other = announcement // the same name, other contents: not this file's entry
        (other.messageId, other.fileDigest) = (42, [0xCD])
        XCTAssertEqual(session.receive(announcement), [])
        _ = session.receive(other)

        let saved = ChatFile(
            path: "/d/cat (1).png", name: "cat (1).png", size: 52_100, image: ImageDimensions(format: "PNG", width: 640, height: 480),
            sha256: "ab01")
        let effects = session.fileSaved(from: "bob", saved)
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(2).first, "12:00 bob: [image] cat (1).png 640×480 (52.1 kB) saved to /d/cat (1).png")
        let savedFile = HistoryFile(name: "cat (1).png", size: 52_100, width: 640, height: 480, path: "/d/cat (1).png", sha256: "ab01")
        XCTAssertEqual(effects, [.recordFile(messageId: 41, from: "bob", savedFile)])
        XCTAssertEqual(session.fileSaved(from: "bob", saved), [], "recorded once")

        recorded.file = savedFile
        terminal = VirtualTerminal(width: 140, height: 12) // the chat started again
        startSession(history: [recorded, HistoryEntry(received: other)])
        XCTAssertEqual(
            Array(terminal.transcript.prefix(3)),
            [
                "-- last 2 of 2 messages; /history shows older ones", "12:00 bob: [image] cat (1).png 640×480 (52.1 kB) saved to /d/cat (1).png",
                "12:00 bob: [file] cat.png (52.1 kB) (not received)",
            ])
    }

    func testRetryOffersFilesThatFailedOrStoppedInAnEarlierSessionOnce() {
        func sent(_ id: UInt64, _ name: String, status: String, image: Bool = false) -> HistoryEntry {
            var entry = HistoryEntry(id: id, time: 1, from: "alice", to: "bob", kind: "file", text: "", status: status)
            entry.file = HistoryFile(name: name, size: 1_000, width: image ? 2 : nil, height: image ? 1 : nil, path: "/p/" + name)
            return entry
        }
        startSession(history: [
            sent(1, "a.bin", status: "failed"), sent(2, "b.png", status: "sending", image: true), sent(3, "c.bin", status: "delivered"),
        ])
        XCTAssertEqual(
            Array(terminal.transcript.prefix(4)),
            [
                "-- last 3 of 3 messages; /history shows older ones", "12:00 you → bob: [file] a.bin (1.0 kB) ✗",
                "12:00 you → bob: [image] b.png 2×1 (1.0 kB) ✗ (stopped before the end; /retry goes on)", "12:00 you → bob: [file] c.bin (1.0 kB) ✓✓",
            ])
        XCTAssertEqual(
            type("/retry\r"),
            [
                .recordStatus(messageId: 1, status: "retried"), .recordStatus(messageId: 2, status: "retried"),
                .checkFile(path: "/p/a.bin", to: "bob", image: false), .checkFile(path: "/p/b.png", to: "bob", image: true),
            ])
        XCTAssertEqual(type("/retry\r"), [])
        XCTAssertEqual(terminal.transcript.suffix(2).first, "-- nothing to retry: no message failed")
    }
}

/// Tab after `/file ` completes the path from the directory's entries, spaces and all.
final class PathCompletionTests: XCTestCase {
    let entries: [String: [String]] = ["/tmp/": ["My Files/", "My Fonts/", "notes.txt", ".hidden"], "/tmp/My Files/": ["a b.pdf"], "": ["x.png"]]

    func complete(_ text: String) -> Completion.Outcome? {
        PathCompletion.complete(text: text, cursor: text.count, list: { self.entries[$0] })
    }

    func testPathsWithSpacesCompleteAsFarAsTheyAgreeThenList() {
        XCTAssertEqual(complete("/file /tmp/My"), Completion.Outcome(text: "/file /tmp/My F", cursor: 15, listed: []))
        XCTAssertEqual(complete("/file /tmp/My F"), Completion.Outcome(text: "/file /tmp/My F", cursor: 15, listed: ["My Files/", "My Fonts/"]))
        XCTAssertEqual(complete("/file /tmp/My Fi"), Completion.Outcome(text: "/file /tmp/My Files/", cursor: 20, listed: []))
        XCTAssertEqual(complete("/file /tmp/My Files/a"), Completion.Outcome(text: "/file /tmp/My Files/a b.pdf", cursor: 27, listed: []))
        XCTAssertEqual(complete("/image x"), Completion.Outcome(text: "/image x.png", cursor: 12, listed: []))
        XCTAssertEqual(complete("/file /tmp/.h")?.text, "/file /tmp/.hidden")
        XCTAssertEqual(complete("/file /tmp/")?.listed, ["My Files/", "My Fonts/", "notes.txt"], "hidden entries only for a name starting with .")
    }

    func testOtherLinesAreLeftToNameCompletion() {
        XCTAssertNil(complete("/to bo"))
        XCTAssertNil(complete("/file"))
        XCTAssertNil(complete("/image https://exa"))
        XCTAssertEqual(complete("/file /nowhere/x"), Completion.Outcome(text: "/file /nowhere/x", cursor: 16, listed: []))
    }
}
