import Foundation
import SIMPCommandLine
import SIMPRedis
import SIMPTestSupport
import XCTest

/// `simp-server user add` at a terminal asks again after a weak password or two entries that
/// differ, as passwd(1) does; without a terminal a weak password still fails at once.
final class UserAddPromptTests: XCTestCase {
    func testAWeakOrMistypedPasswordAtTheTerminalIsAskedForAgain() async throws {
        let redis = try await RedisServerProcess.start()
        let user = TestRelay.uniqueUser("erin")
        let terminal = try PseudoTerminalProcess(
            "simp-server", ["user", "add", user, "--iterations", "4096", "--redis", redis.url.description])
        func prompted(_ text: String, count: Int) async -> Bool {
            await Eventually.holds { terminal.rawOutput.components(separatedBy: text).count - 1 >= count }
        }
        var asked = await prompted("password for \(user): ", count: 1)
        XCTAssertTrue(asked, terminal.rawOutput)
        terminal.type("short\r")
        asked = await prompted("password for \(user): ", count: 2)
        XCTAssertTrue(asked, terminal.rawOutput)
        XCTAssertTrue(terminal.rawOutput.contains("too weak: it has 5 characters"), terminal.rawOutput)
        terminal.type("four words of erin's\r")
        asked = await prompted("again: ", count: 1)
        XCTAssertTrue(asked, terminal.rawOutput)
        terminal.type("four words of erins\r")
        asked = await prompted("password for \(user): ", count: 3)
        XCTAssertTrue(asked, terminal.rawOutput)
        XCTAssertTrue(terminal.rawOutput.contains("the two entries differ"), terminal.rawOutput)
        terminal.type("four words of erin's\r")
        asked = await prompted("again: ", count: 2)
        XCTAssertTrue(asked, terminal.rawOutput)
        terminal.type("four words of erin's\r")
        let status = await terminal.child.exitStatus()
        XCTAssertEqual(status, 0, terminal.rawOutput)
        XCTAssertTrue(terminal.rawOutput.contains("user \(user) added"), terminal.rawOutput)
        XCTAssertFalse(terminal.rawOutput.contains("four words"), "the password is never echoed: \(terminal.rawOutput)")

        let inspector = RedisClient(url: redis.url)
        let stored = try await inspector.command(["EXISTS", "simp:cred:{\(user)}"]).integer
        XCTAssertEqual(stored, 1)
        await inspector.shutdown()
        await redis.stop()
    }

    func testWithoutATerminalAndWithoutAPasswordItSaysWhereOneComesFrom() async throws {
        let add = try ChildProcess("simp-server", ["user", "add", "nobody", "--redis", "redis://127.0.0.1:1"])
        let status = await add.exitStatus()
        XCTAssertEqual(status, 1)
        XCTAssertEqual(
            add.standardError, "simp-server user add: no password: give --password-file, set SIMP_PASSWORD, or run it in a terminal\n")
    }
}
