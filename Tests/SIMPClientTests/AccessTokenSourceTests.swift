import Foundation
import SIMPClient
import XCTest

/// Where `simp` gets its access token: a file read again at each renewal, a command run again,
/// and what it says when either fails (never the token).
final class AccessTokenSourceTests: XCTestCase {
    func testAFileIsReadAgainAndACommandRunAgainEachTime() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("token-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        try "first.token.one\n".write(to: file, atomically: true, encoding: .utf8)
        let fromFile = AccessTokenSource.file(file.path)
        XCTAssertEqual(try fromFile.read(), "first.token.one")
        try "second.token.two\n".write(to: file, atomically: true, encoding: .utf8)
        XCTAssertEqual(try fromFile.read(), "second.token.two", "renewed from the file")

        let counter = file.path + ".n"
        defer { try? FileManager.default.removeItem(atPath: counter) }
        let command = AccessTokenSource.command("echo x >> \(counter); echo token-$(wc -l < \(counter))")
        XCTAssertEqual(try command.read(), "token-1")
        XCTAssertEqual(try command.read(), "token-2", "run again")
        XCTAssertFalse(AccessTokenSource.fixed("t").renews)
    }

    func testFailuresSayWhatToFix() {
        XCTAssertThrowsError(try AccessTokenSource.command("echo 'the auth service is down' >&2; exit 3").read()) { error in
            XCTAssertEqual("\(error)", "--token-command exited with status 3: the auth service is down")
        }
        XCTAssertThrowsError(try AccessTokenSource.command("true").read()) { error in
            XCTAssertEqual("\(error)", "the access token from --token-command \"true\" is empty")
        }
        XCTAssertThrowsError(try AccessTokenSource.file("/nonexistent/token").read()) { error in
            XCTAssertTrue("\(error)".hasPrefix("cannot read the token file /nonexistent/token"), "\(error)")
        }
    }
}
