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
        XCTAssertEqual(started, [.sendFile(ref: 0, file, to: "bob")])
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
            "-- 1 file still being sent; /quit again to stop it (the same /file to the same person later goes on where it stopped)")
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
        XCTAssertEqual(type("/retry\r"), [.checkFile(path: "/p/cat.png", to: "bob", image: true)])

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
        XCTAssertEqual(session.fileChecked(to: "#lobby", .success(file)), [.sendFile(ref: 0, file, to: "#lobby")])
        _ = session.resolved(ref: 0, .roomDelivered(1, of: 2))
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(2).first, "12:00 you → #lobby: [file] a.bin (2.0 kB) ✓ 1/2")
        _ = session.resolved(ref: 0, .roomDelivered(2, of: 2))
        refresh()
        XCTAssertEqual(terminal.transcript.suffix(2).first, "12:00 you → #lobby: [file] a.bin (2.0 kB) ✓✓ 2/2")
    }

    func testAReceivedFileIsAnnouncedThenShownSaved() {
        startSession()
        var announcement = SIMPMessage(kind: .text, toUser: "alice", content: "cat.png")
        announcement.fromUser = "bob"
        announcement.fileId = 7
        announcement.fileSize = 52_100
        announcement.e2ePayload = [1] // came end to end encrypted
        _ = session.receive(announcement)
        session.fileSaved(
            from: "bob", ChatFile(path: "/d/cat.png", name: "cat.png", size: 52_100, image: ImageDimensions(format: "PNG", width: 640, height: 480)))
        session.fileNotReceived("big.iso from bob (5000000000 bytes) is larger than 4294967296 bytes: refused")
        refresh()
        XCTAssertEqual(
            terminal.transcript.suffix(4),
            [
                "-- bob is sending cat.png (52.1 kB)", "12:00 bob: [image] cat.png 640×480 (52.1 kB) saved to /d/cat.png",
                "-- file not received: big.iso from bob (5000000000 bytes) is larger than 4294967296 bytes: refused", "bob>",
            ])
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
