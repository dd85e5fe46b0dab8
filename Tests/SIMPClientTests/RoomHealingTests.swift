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

/// Rooms heal after a member's keys are reset: bob's `simp listen` is stopped, his keys are
/// deleted, and he listens again (new keys, published); carol, whose client ran all along, then
/// posts twice: bob prints both.
final class RoomKeyResetTests: StoryProcessTestCase {
    func testPostsAfterAMembersKeyResetReachHim() async throws {
        let carol = TestRelay.uniqueUser("carol"), bob = TestRelay.uniqueUser("bob")
        let room = TestRelay.uniqueUser("ops")
        let server = "127.0.0.1:\(relay.port)"
        let author = try await relay.connectClient(user: carol) {
            $0.device = "desk"
            $0.endToEnd = EndToEndSettings(home: self.home)
        }
        _ = try await author.joinRoom(room)
        let listenArguments = ["listen", "--server", server, "--user", bob, "--device", "phone", "--room", room]
        let first = try ChildProcess("simp", listenArguments, environment: try await environment(bob))
        children.append(first)
        let listening = await Eventually.holds(within: .seconds(15)) { first.standardError.contains("listening as") }
        XCTAssertTrue(listening, first.standardError)
        _ = try await author.send(text: "before the reset", toRoom: room)
        let read = await Eventually.holds(within: .seconds(15)) { self.printed(by: [first]) == ["before the reset"] }
        XCTAssertTrue(read, first.standardOutput + first.standardError)

        first.signal(SIGTERM)
        _ = await first.exitStatus()
        try FileManager.default.removeItem(at: home.appendingPathComponent("e2e").appendingPathComponent(bob))
        let second = try ChildProcess("simp", listenArguments, environment: try await environment(bob))
        children.append(second)
        let again = await Eventually.holds(within: .seconds(15)) { second.standardError.contains("listening as") }
        XCTAssertTrue(again, second.standardError)
        _ = try await author.send(text: "after the reset 1", toRoom: room)
        _ = try await author.send(text: "after the reset 2", toRoom: room)
        let healed = await Eventually.holds(within: .seconds(30)) {
            self.printed(by: [second]) == ["after the reset 1", "after the reset 2"]
        }
        XCTAssertTrue(healed, second.standardOutput + second.standardError)
        await author.close()
    }
}
