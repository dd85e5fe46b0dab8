import Foundation
import NIOCore
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// The sender's side of the durability contract (docs/E2E.md §15) with real processes: alice's
/// `simp chat`, end to end, has its `$SIMP_HOME` on a small tmpfs that fills up while she types.
/// Nothing she typed is lost: she is told once that her state cannot be written (and once when
/// it can again), her messages wait in memory, and once space returns every one reaches bob's
/// `simp listen` once, in order, and her history has every line she typed with its state.
final class SenderDiskFullTests: StoryProcessTestCase {
    func testASenderWhoseDiskIsFullLosesNothingTypedAndIsTold() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let disk = try await mountSmallDisk()
        defer {
            _ = try? Process.run(URL(fileURLWithPath: "/bin/umount"), arguments: ["-l", disk.path]).waitUntilExit()
            try? FileManager.default.removeItem(at: disk)
        }
        let listen = try await startListening(bob, server: "127.0.0.1:\(relay.port)")
        let input = Pipe()
        let chat = try ChildProcess(
            "simp", ["chat", "--server", "127.0.0.1:\(relay.port)", "--user", alice, "--device", "desk", "--to", bob],
            environment: try await environment(alice).merging(["SIMP_HOME": disk.path, "NO_COLOR": "1"]) { $1 },
            standardInput: input.fileHandleForReading)
        children.append(chat)
        let connected = await Eventually.holds(within: .seconds(15)) { chat.standardOutput.contains("-- connected as \(alice)") }
        XCTAssertTrue(connected, chat.standardOutput + chat.standardError)
        let before = (1...5).map { "before \($0)" }
        try await type(before, into: input.fileHandleForWriting)
        let arrived = await Eventually.holds(within: .seconds(20)) { Set(self.printed(by: [listen])).isSuperset(of: before) }
        XCTAssertTrue(arrived, chat.standardOutput + chat.standardError)

        let filler = disk.appendingPathComponent("filler")
        for (index, block) in ["64k", "4k", "1"].enumerated() { // until the disk is full, to the last byte
            _ = try? await ToolProcess.run("dd", ["if=/dev/zero", "of=\(filler.path).\(index)", "bs=\(block)"], in: disk)
        }
        let full = (1...60).map { "full \($0)" } // more than the last pages of her files hold
        try await type(full, into: input.fileHandleForWriting)
        let told = await Eventually.holds(within: .seconds(20)) { (chat.standardOutput + chat.standardError).contains("cannot write") }
        XCTAssertTrue(told, "alice is told her disk is full\n" + chat.standardOutput + chat.standardError)
        try await Task.sleep(nanoseconds: 2_000_000_000)

        for index in 0..<3 { try FileManager.default.removeItem(atPath: "\(filler.path).\(index)") }
        try await assertEveryMessageOnce(before + full, printedBy: [listen], within: .seconds(60))
        XCTAssertEqual(printed(by: [listen]), before + full, "in order")
        let again = await Eventually.holds(within: .seconds(20)) { (chat.standardOutput + chat.standardError).contains("written again") }
        XCTAssertTrue(again, "alice is told it works again\n" + chat.standardOutput + chat.standardError)
        let kept = await Eventually.holds(within: .seconds(20)) { self.sentHistory(of: alice, home: disk) == before + full }
        XCTAssertTrue(kept, "alice's history has every line she typed: \(sentHistory(of: alice, home: disk))")

        // A line in the history is in the outbox: alice killed -9 right after, with bob not
        // reading (no receipt yet), loses none of them.
        listen.signal(SIGSTOP)
        let after = (1...10).map { "after \($0)" }
        try await type(after, into: input.fileHandleForWriting)
        let accepted = await Eventually.holds(within: .seconds(20)) { self.sentHistory(of: alice, home: disk).suffix(10) == after[...] }
        XCTAssertTrue(accepted, chat.standardOutput + chat.standardError)
        chat.signal(SIGKILL)
        _ = await chat.exitStatus()
        listen.signal(SIGCONT)
        let restarted = try ChildProcess(
            "simp", ["chat", "--server", "127.0.0.1:\(relay.port)", "--user", alice, "--device", "desk", "--to", bob],
            environment: try await environment(alice).merging(["SIMP_HOME": disk.path, "NO_COLOR": "1"]) { $1 },
            standardInput: Pipe().fileHandleForReading)
        children.append(restarted)
        try await assertEveryMessageOnce(before + full + after, printedBy: [listen], within: .seconds(60))
        XCTAssertEqual(printed(by: [listen]), before + full + after, "in order")
        try? input.fileHandleForWriting.close()
    }

    /// A 4 MiB tmpfs (skips the test where it cannot be mounted: not root).
    private func mountSmallDisk() async throws -> URL {
        let disk = FileManager.default.temporaryDirectory.appendingPathComponent("simp-full-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: disk, withIntermediateDirectories: true)
        do { _ = try await ToolProcess.run("mount", ["-t", "tmpfs", "-o", "size=4m", "tmpfs", disk.path], in: disk) } catch {
            throw XCTSkip("cannot mount a tmpfs here (needs root): \(error)")
        }
        return disk
    }

    /// Types `lines` into the chat, one every 20 ms.
    private func type(_ lines: [String], into input: FileHandle) async throws {
        for line in lines {
            input.write(Data((line + "\n").utf8))
            try await Task.sleep(nanoseconds: 20_000_000)
        }
    }

    /// The texts `user` sent, as its history under `home` has them (each once, with a state).
    private func sentHistory(of user: String, home: URL) -> [String] {
        let file = home.appendingPathComponent("history").appendingPathComponent(user + ".jsonl")
        guard let data = FileManager.default.contents(atPath: file.path) else { return [] }
        return data.split(separator: UInt8(ascii: "\n")).compactMap { line in
            guard let entry = try? JSONSerialization.jsonObject(with: line) as? [String: Any], entry["from"] as? String == user else { return nil }
            return entry["text"] as? String
        }
    }
}
