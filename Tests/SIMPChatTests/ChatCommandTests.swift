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
        XCTAssertEqual(ChatCommand.parse("/image"), .invalid("usage: /image URL [SCALE]"))
        XCTAssertEqual(ChatCommand.parse("/image u -2"), .invalid("the image scale must be a positive number, got \"-2\""))
        XCTAssertEqual(ChatCommand.parse("/history x"), .invalid("/history takes a positive number, got \"x\""))
        XCTAssertEqual(ChatCommand.parse("@ hi"), .invalid("usage: @NAME TEXT"))
    }
}
