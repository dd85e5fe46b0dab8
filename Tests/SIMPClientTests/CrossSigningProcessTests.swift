import Foundation
import SIMPTestSupport
import XCTest

/// `simp devices approve` as processes against a real relay and Redis (docs/E2E.md §3.4): bob's
/// first device made his user key; his second device reads alice's messages only once the first
/// approved it, and `simp send` says so before.
final class CrossSigningProcessTests: StoryProcessTestCase {
    private var server: String { "127.0.0.1:\(relay.port)" }

    /// Runs `simp ARGUMENTS…` (with the server and the user's password and home) to its end.
    private func simp(_ user: String, _ arguments: [String]) async throws -> (status: Int32?, standardOutput: String, standardError: String) {
        let process = try ChildProcess("simp", arguments + ["--server", server, "--user", user], environment: try await environment(user))
        children.append(process)
        let status = await process.exitStatus()
        return (status, process.standardOutput, process.standardError)
    }

    func testANewDeviceReadsOnlyOnceTheFirstDeviceApprovedIt() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let phone = try await startListening(bob, server: server, device: "phone") // bob's first device: his user key
        phone.signal(SIGTERM)
        _ = await phone.exitStatus()
        let laptop = try await startListening(bob, server: server, device: "laptop")

        let before = try await simp(alice, ["send", "--device", "desk", "--to", bob, "before approval"])
        XCTAssertEqual(before.status, 0, before.standardError)
        XCTAssertTrue(before.standardError.contains("have not approved (laptop): not sending to it"), before.standardError)

        // The laptop shows its device code; approving without it shows the code of the keys the
        // relay serves as laptop, and stops (no terminal to ask on); a wrong code approves nothing.
        let shown = await Eventually.holds(within: .seconds(15)) { laptop.standardError.contains("its device code is ") }
        XCTAssertTrue(shown, laptop.standardError)
        let laptopCode = String(laptop.standardError.components(separatedBy: "its device code is ").last?.prefix(17) ?? "")
        XCTAssertEqual(laptopCode.filter(\.isNumber).count, 15, laptop.standardError)
        let unchecked = try await simp(bob, ["devices", "approve", "laptop", "--device", "phone"])
        XCTAssertEqual(unchecked.status, 1, unchecked.standardOutput)
        XCTAssertTrue(
            unchecked.standardError.contains("--code '\(laptopCode)'"), "the relay serves the laptop's own keys: " + unchecked.standardError)
        let wrong = try await simp(bob, ["devices", "approve", "laptop", "--device", "phone", "--code", "11111 22222 33333"])
        XCTAssertEqual(wrong.status, 1, wrong.standardOutput)
        XCTAssertTrue(wrong.standardError.contains("not approved"), wrong.standardError)

        let typed = laptopCode.replacingOccurrences(of: " ", with: "-") // as a user may type it
        let approve = try await simp(bob, ["devices", "approve", "laptop", "--device", "phone", "--code", typed])
        XCTAssertEqual(approve.status, 0, approve.standardError)
        XCTAssertTrue(approve.standardOutput.contains("laptop (device code \(typed)) is approved"), approve.standardOutput)

        let after = try await simp(alice, ["send", "--device", "desk", "--to", bob, "after approval"])
        XCTAssertEqual(after.status, 0, after.standardError)
        let arrived = await Eventually.holds(within: .seconds(15)) { laptop.standardOutput.contains("after approval") }
        XCTAssertTrue(arrived, laptop.standardOutput + laptop.standardError)
        XCTAssertFalse(laptop.standardOutput.contains("before approval"), laptop.standardOutput)
    }
}
