import Foundation
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// What `simp send`, `simp keys` and `simp listen` say and do about end-to-end encryption, as
/// processes against a real relay and Redis (docs/E2E.md §10): a verified user's changed key
/// stops sending until accepted, every message is marked with where it came from, and a
/// message the relay could have written (not end to end encrypted) is not shown as genuine.
final class HonestEndToEndTests: StoryProcessTestCase {
    private var server: String { "127.0.0.1:\(relay.port)" }

    /// Runs `simp COMMAND --server … --user USER ARGUMENTS…` to its end.
    private func simp(_ user: String, _ arguments: [String]) async throws -> (status: Int32?, standardOutput: String, standardError: String) {
        let process = try ChildProcess(
            "simp", Array(arguments.prefix(1)) + ["--server", server, "--user", user] + arguments.dropFirst(),
            environment: try await environment(user))
        children.append(process)
        let status = await process.exitStatus()
        return (status, process.standardOutput, process.standardError)
    }

    /// alice verified bob; bob's key changes: `simp send` exits 1 naming the device and how to
    /// accept, and sends nothing; `simp keys --accept` lets the next send go, which says the
    /// safety number changed... once (it was said by the refused send already).
    func testAVerifiedUsersChangedKeyStopsSimpSendUntilAccepted() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let bobListen = try ChildProcess(
            "simp", ["listen", "--server", server, "--user", bob, "--device", "phone"], environment: try await environment(bob))
        children.append(bobListen)
        let listening = await Eventually.holds(within: .seconds(15)) { bobListen.standardError.contains("listening as") }
        XCTAssertTrue(listening, bobListen.standardError)
        let first = try await simp(alice, ["send", "--device", "desk", "--to", bob, "one"])
        XCTAssertEqual(first.status, 0, first.standardError)
        let confirm = try await simp(alice, ["keys", "--device", "desk", "--with", bob, "--confirm"])
        XCTAssertEqual(confirm.status, 0, confirm.standardError)
        XCTAssertTrue(confirm.standardOutput.contains("\(bob) is verified (1 device)"), confirm.standardOutput)

        bobListen.signal(SIGKILL)
        _ = await bobListen.exitStatus()
        try FileManager.default.removeItem(at: EndToEndFileStore(home: home, user: bob, device: "phone").directory)
        let bobAgain = try ChildProcess(
            "simp", ["listen", "--server", server, "--user", bob, "--device", "phone", "--json"], environment: try await environment(bob))
        children.append(bobAgain)
        let published = await Eventually.holds(within: .seconds(15)) {
            FileManager.default.fileExists(
                atPath: EndToEndFileStore(home: self.home, user: bob, device: "phone").directory.appendingPathComponent("identity").path)
        }
        XCTAssertTrue(published)
        try await Task.sleep(nanoseconds: 500_000_000) // its bundle published

        let refused = try await simp(alice, ["send", "--device", "desk", "--to", bob, "secret for the old key"])
        XCTAssertEqual(refused.status, 1, refused.standardOutput + refused.standardError)
        XCTAssertTrue(refused.standardError.contains("device phone changed"), refused.standardError)
        XCTAssertTrue(refused.standardError.contains("simp keys --with \(bob) --accept"), refused.standardError)
        XCTAssertTrue(refused.standardError.contains("safety number changed"), refused.standardError)
        XCTAssertFalse(refused.standardError.contains("--no-e2e"), refused.standardError)

        let accept = try await simp(alice, ["keys", "--device", "desk", "--with", bob, "--accept"])
        XCTAssertEqual(accept.status, 0, accept.standardError)
        XCTAssertTrue(accept.standardOutput.contains("no longer verified"), accept.standardOutput)
        let sent = try await simp(alice, ["send", "--device", "desk", "--to", bob, "after accepting"])
        XCTAssertEqual(sent.status, 0, sent.standardError)
        let arrived = await Eventually.holds(within: .seconds(15)) { bobAgain.standardOutput.contains("after accepting") }
        XCTAssertTrue(arrived, bobAgain.standardOutput + bobAgain.standardError)
        XCTAssertFalse(bobAgain.standardOutput.contains("secret for the old key"), "the refused message was never sent")
        let line = bobAgain.standardOutput.split(separator: "\n").first { $0.contains("after accepting") }.map(String.init) ?? ""
        let json = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        XCTAssertEqual(json?["e2e"] as? Bool, true, line)
        XCTAssertEqual(json?["device"] as? String, "desk", line)
        XCTAssertEqual(json?["verified"] as? Bool, false, line)
    }

    /// A message with no end-to-end payload (as the relay's operator could write into an inbox,
    /// here sent by a client without end-to-end encryption) is not shown by `simp listen`: it is
    /// counted and warned of once; the encrypted one is shown, marked. `--allow-plaintext` shows
    /// it, marked as not end to end encrypted.
    func testListenRefusesPlaintextAndMarksEveryMessage() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob"), mallory = TestRelay.uniqueUser("mallory")
        let listen = try ChildProcess(
            "simp", ["listen", "--server", server, "--user", bob, "--device", "phone", "--count", "1"], environment: try await environment(bob))
        children.append(listen)
        let registered = try await Eventually.holds { try await self.relay.inspector.command(["EXISTS", "simp:user:{\(bob)}"]).integer == 1 }
        XCTAssertTrue(registered, listen.standardError)
        let forger = try await relay.connectClient(user: mallory)
        guard case .delivered = try await forger.send(text: "forged: trust me", to: bob) else { return XCTFail("not delivered") }
        let warned = await Eventually.holds(within: .seconds(10)) { listen.standardError.contains("refused a message from \(mallory)") }
        XCTAssertTrue(warned, listen.standardError)
        _ = try await forger.send(text: "forged again", to: bob)
        let sent = try await simp(alice, ["send", "--device", "desk", "--to", bob, "genuine"])
        XCTAssertEqual(sent.status, 0, sent.standardError)
        let status = await listen.exitStatus()
        XCTAssertEqual(status, 0, listen.standardError)
        XCTAssertFalse(listen.standardOutput.contains("forged"), listen.standardOutput)
        XCTAssertTrue(listen.standardOutput.contains("\(alice) (desk, not verified): genuine"), listen.standardOutput)
        XCTAssertEqual(listen.standardError.components(separatedBy: "refused a message").count, 2, "warned once: \(listen.standardError)")
        XCTAssertTrue(listen.standardError.contains("2 messages refused"), listen.standardError)

        let allowing = try ChildProcess(
            "simp", ["listen", "--server", server, "--user", bob, "--device", "phone", "--count", "1", "--allow-plaintext", "--json"],
            environment: try await environment(bob))
        children.append(allowing)
        _ = try await forger.send(text: "shown marked", to: bob)
        let allowed = await allowing.exitStatus()
        XCTAssertEqual(allowed, 0, allowing.standardError)
        let json = try JSONSerialization.jsonObject(with: Data(allowing.standardOutput.utf8)) as? [String: Any]
        XCTAssertEqual(json?["content"] as? String, "shown marked", allowing.standardOutput)
        XCTAssertEqual(json?["e2e"] as? Bool, false, allowing.standardOutput)
        await forger.close()
    }

    /// A device of bob's own account that none of his devices knew logs in (as a relay's
    /// operator could add one): bob's running `simp listen` says so loudly on standard error,
    /// and `--json` as an `ownNewDevice` event.
    func testListenSaysLoudlyThatAnUnknownDeviceLoggedInAsItsUser() async throws {
        let bob = TestRelay.uniqueUser("bob")
        let listen = try ChildProcess(
            "simp", ["listen", "--server", server, "--user", bob, "--device", "phone", "--json"], environment: try await environment(bob))
        children.append(listen)
        let registered = try await Eventually.holds { try await self.relay.inspector.command(["EXISTS", "simp:user:{\(bob)}"]).integer == 1 }
        XCTAssertTrue(registered, listen.standardError)
        try await Task.sleep(nanoseconds: 500_000_000) // its own devices fetched once (not news)
        let ghost = try await relay.connectClient(user: bob) { configuration in
            configuration.device = "ghost"
            configuration.endToEnd = EndToEndSettings(home: self.home)
        }
        let told = await Eventually.holds(within: .seconds(15)) { listen.standardOutput.contains("\"event\":\"ownNewDevice\"") }
        XCTAssertTrue(told, listen.standardOutput + listen.standardError)
        XCTAssertTrue(listen.standardOutput.contains("\"device\":\"ghost\""), listen.standardOutput)
        await ghost.close()
    }
}
