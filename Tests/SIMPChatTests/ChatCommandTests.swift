import SIMPChat
import XCTest

final class ChatCommandTests: XCTestCase {
    func testMessagesAndAddressing() {
        XCTAssertEqual(ChatCommand.parse("hello there "), .say("hello there", to: nil))
        XCTAssertEqual(ChatCommand.parse("@bob hello there"), .say("hello there", to: "bob"))
        XCTAssertEqual(ChatCommand.parse("@bob"), .switchPeer("bob"))
        XCTAssertEqual(ChatCommand.parse("/to carol"), .switchPeer("carol"))
        XCTAssertEqual(ChatCommand.parse("//etc/passwd is a path"), .say("/etc/passwd is a path", to: nil))
        XCTAssertEqual(ChatCommand.parse("   "), .nothing)
    }

    func testCommands() {
        XCTAssertEqual(ChatCommand.parse("/image https://x.org/cat.png"), .image(url: "https://x.org/cat.png", scale: 1))
        XCTAssertEqual(ChatCommand.parse("/image https://x.org/cat.png 0.5"), .image(url: "https://x.org/cat.png", scale: 0.5))
        XCTAssertEqual(ChatCommand.parse("/retry"), .retry)
        XCTAssertEqual(ChatCommand.parse("/history"), .history(count: nil))
        XCTAssertEqual(ChatCommand.parse("/history 5"), .history(count: 5))
        XCTAssertEqual(ChatCommand.parse("/HELP"), .help)
        XCTAssertEqual(ChatCommand.parse("/quit"), .quit)
    }

    func testMistakesAreExplained() {
        guard case .invalid(let unknown) = ChatCommand.parse("/frobnicate now") else { return XCTFail() }
        XCTAssertTrue(unknown.contains("unknown command /frobnicate") && unknown.contains("/help"), unknown)
        XCTAssertEqual(ChatCommand.parse("/to"), .invalid("usage: /to NAME"))
        XCTAssertEqual(ChatCommand.parse("/image"), .invalid("usage: /image PATH (a PNG, JPEG or GIF file) or /image URL [SCALE]"))
        XCTAssertEqual(ChatCommand.parse("/image u -2"), .invalid("the image scale must be a positive number, got \"-2\""))
        XCTAssertEqual(ChatCommand.parse("/history x"), .invalid("/history takes a positive number, got \"x\""))
        XCTAssertEqual(ChatCommand.parse("@ hi"), .invalid("usage: @NAME TEXT"))
    }
}

/// `/file PATH` and `/image PATH`: the path is the rest of the line, quoted or with a shell's
/// backslash escapes; `/image URL` stays a link.
final class ChatFileCommandTests: XCTestCase {
    func testFilePathsWithSpacesQuotedEscapedOrAsTheRestOfTheLine() {
        XCTAssertEqual(ChatCommand.parse("/file /tmp/report.pdf"), .file(path: "/tmp/report.pdf", image: false))
        XCTAssertEqual(ChatCommand.parse("/file /tmp/my report.pdf"), .file(path: "/tmp/my report.pdf", image: false))
        XCTAssertEqual(ChatCommand.parse("/file \"/tmp/my  report.pdf\""), .file(path: "/tmp/my  report.pdf", image: false))
        XCTAssertEqual(ChatCommand.parse("/file '/tmp/it is.pdf'  "), .file(path: "/tmp/it is.pdf", image: false))
        XCTAssertEqual(ChatCommand.parse("/file /tmp/my\\ report\\ \\(1\\).pdf"), .file(path: "/tmp/my report (1).pdf", image: false))
        XCTAssertEqual(ChatCommand.parse("/file"), .invalid("usage: /file PATH"))
        XCTAssertEqual(ChatCommand.parse("/file \"\""), .invalid("usage: /file PATH"))
    }

    func testImageTakesAPathOrALink() {
        XCTAssertEqual(ChatCommand.parse("/image ~/Pictures/cat 1.png"), .file(path: "~/Pictures/cat 1.png", image: true))
        XCTAssertEqual(ChatCommand.parse("/img cat.png"), .file(path: "cat.png", image: true))
        XCTAssertEqual(ChatCommand.parse("/image https://example.com/cat.png 0.5"), .image(url: "https://example.com/cat.png", scale: 0.5))
        XCTAssertEqual(ChatCommand.parse("/image"), .invalid("usage: /image PATH (a PNG, JPEG or GIF file) or /image URL [SCALE]"))
    }
}
