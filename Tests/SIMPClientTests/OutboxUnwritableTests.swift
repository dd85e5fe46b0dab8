import Foundation
import SIMPLocalServers
import SIMPTestSupport
import XCTest

/// When the outbox cannot be written (disk full, read-only `$SIMP_HOME`),
/// `simp send` says so once, keeps sending what it could not save, and at exit says which
/// messages were not delivered and are lost, instead of losing them silently. Tests run as
/// root, where chmod does not stop writes: a file stands where a directory is expected.
final class OutboxUnwritableTests: StoryProcessTestCase {
    /// A relay whose inboxes take one message, and `bob`, offline, whose inbox is full: a
    /// message to him stays unreceipted (`still trying`) until simp send is stopped.
    private func startRelayWithBobsInboxFull(_ alice: String, _ bob: String) async throws -> String {
        let port = try FreePort.tcp(), udpPort = try FreePort.udp()
        _ = try await startServer([
            "--port", String(port), "--udp-port", String(udpPort),
            "--redis", relay.redis.url.description, "--relay-id", "unwritable-\(UInt32.random(in: .min ... .max))",
            "--inbox-max-messages", "1",
        ])
        _ = try await environment(bob)
        let server = "127.0.0.1:\(port)"
        let first = try ChildProcess(
            "simp", ["send", "--no-e2e", "--server", server, "--user", alice, "--to", bob, "first"],
            environment: try await environment(alice))
        children.append(first)
        let status = await first.exitStatus()
        XCTAssertEqual(status, 0, first.standardError)
        return server
    }

    /// Stops `send` with signal `number` and returns its standard error; it exits 128 + `number`.
    private func stop(_ send: ChildProcess, with number: Int32) async -> String {
        send.signal(number)
        let status = await send.exitStatus()
        XCTAssertEqual(status, 128 + number, send.standardError)
        return send.standardError
    }

    /// The outbox directory is replaced by a file after the first message was saved (and the
    /// device's end-to-end journal, which takes the outbox's records, by a directory): the next
    /// two cannot be saved. One notice says so; at Ctrl-C both are listed as lost, the first
    /// (in the outbox) is not.
    func testAnOutboxThatCannotBeWrittenIsSaidOnceAndWhatIsLostIsListedAtExit() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let server = try await startRelayWithBobsInboxFull(alice, bob)
        let input = Pipe()
        let send = try ChildProcess(
            "simp", ["send", "--no-e2e", "--server", server, "--user", alice, "--device", "desk", "--to", bob, "--lines"],
            environment: try await environment(alice), standardInput: input.fileHandleForReading)
        children.append(send)
        input.fileHandleForWriting.write(Data("second\n".utf8))
        let submitted = await Eventually.holds { send.standardOutput.contains("message ") }
        XCTAssertTrue(submitted, send.standardOutput + send.standardError)

        let outbox = home.appendingPathComponent("outbox").appendingPathComponent(alice).appendingPathComponent("desk.outbox")
        try FileManager.default.moveItem(at: outbox, to: outbox.appendingPathExtension("aside"))
        try Data().write(to: outbox)
        let journal = home.appendingPathComponent("e2e").appendingPathComponent(alice).appendingPathComponent("desk")
            .appendingPathComponent("journal")
        try FileManager.default.moveItem(at: journal, to: journal.appendingPathExtension("aside"))
        try FileManager.default.createDirectory(at: journal, withIntermediateDirectories: false)
        input.fileHandleForWriting.write(Data("third\nfourth\n".utf8))
        let allSubmitted = await Eventually.holds {
            send.standardOutput.components(separatedBy: "message ").count == 4
        }
        XCTAssertTrue(allSubmitted, send.standardOutput + send.standardError)

        let errors = await stop(send, with: SIGINT)
        XCTAssertEqual(errors.components(separatedBy: "the outbox cannot be written").count, 2, "said once: \(errors)")
        XCTAssertTrue(errors.contains("2 messages not delivered are lost now"), errors)
        XCTAssertTrue(errors.contains("to \(bob): third\n") && errors.contains("to \(bob): fourth\n"), errors)
        XCTAssertFalse(errors.contains("to \(bob): second\n"), "in the outbox, not lost: \(errors)")
    }

    /// `$SIMP_HOME` is a file: no outbox at all. simp send says so once at start and, when it
    /// ends without the receipt, that the message is lost.
    func testWithoutAnOutboxTheUndeliveredMessageIsNamedAtExit() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let server = try await startRelayWithBobsInboxFull(alice, bob)
        let fileHome = home.appendingPathExtension("file")
        try Data().write(to: fileHome)
        defer { try? FileManager.default.removeItem(at: fileHome) }
        var environment = try await environment(alice)
        environment["SIMP_HOME"] = fileHome.path
        let send = try ChildProcess(
            "simp", ["send", "--no-e2e", "--server", server, "--user", alice, "--to", bob, "second"], environment: environment)
        children.append(send)
        let submitted = await Eventually.holds { send.standardOutput.contains("message ") }
        XCTAssertTrue(submitted, send.standardOutput + send.standardError)

        let errors = await stop(send, with: SIGTERM)
        XCTAssertEqual(errors.components(separatedBy: "kept in memory only").count, 2, "said once: \(errors)")
        XCTAssertTrue(errors.contains("1 message not delivered is lost now"), errors)
        XCTAssertTrue(errors.contains("to \(bob): second\n"), errors)
    }
}
