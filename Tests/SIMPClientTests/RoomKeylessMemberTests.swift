import Foundation
import NIOCore
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// A room member with no end-to-end keys (a client that never published any) never turns a
/// post into a refusal with a `--no-e2e` suggestion: carol's `simp send --room` posts end to
/// end to the members who can read it (dave's `simp listen` prints it), and says who cannot.
/// Real relay, real Redis, real processes.
final class RoomKeylessMemberTests: StoryProcessTestCase {
    func testAMemberWithoutKeysIsNamedAndThePostStillGoesEndToEnd() async throws {
        let carol = TestRelay.uniqueUser("carol"), bob = TestRelay.uniqueUser("bob"), dave = TestRelay.uniqueUser("dave")
        let room = TestRelay.uniqueUser("ops")
        let server = "127.0.0.1:\(relay.port)"
        _ = try await environment(bob)
        let keyless = try await relay.connectClient(user: bob) // end to end off: publishes no keys
        let bobsInbox = MessageInbox(keyless)
        _ = try await keyless.joinRoom(room)
        let reader = try ChildProcess(
            "simp", ["listen", "--server", server, "--user", dave, "--device", "phone", "--room", room],
            environment: try await environment(dave))
        children.append(reader)
        let listening = await Eventually.holds(within: .seconds(15)) { reader.standardError.contains("listening as") }
        XCTAssertTrue(listening, reader.standardError)

        let post = try ChildProcess(
            "simp", ["send", "--server", server, "--user", carol, "--device", "desk", "--room", room, "--join", "hello room"],
            environment: try await environment(carol))
        children.append(post)
        let status = await post.exitStatus(timeout: 30)
        XCTAssertEqual(status, 0, post.standardError)
        XCTAssertTrue(post.standardError.contains("\(bob) in #\(room) has no usable end-to-end keys"), post.standardError)
        XCTAssertFalse(post.standardError.contains("--no-e2e"), "never a suggestion to post unencrypted: \(post.standardError)")
        let printed = await Eventually.holds(within: .seconds(15)) { self.printed(by: [reader]) == ["hello room"] }
        XCTAssertTrue(printed, reader.standardOutput + reader.standardError)
        try await Task.sleep(nanoseconds: 1_000_000_000)
        let bobGot = await bobsInbox.messages
        XCTAssertFalse(bobGot.contains { $0.content == "hello room" }, "the post went end to end, not in plaintext")
        await keyless.close()
    }
}
