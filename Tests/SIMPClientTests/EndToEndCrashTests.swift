import Foundation
import NIOCore
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// The durability contract of an end-to-end receiver (docs/E2E.md §15): bob's `simp listen`,
/// end to end, is killed with `kill -9` several times while alice's end-to-end messages stream
/// in live, and while the relay flushes his inbox. Over all runs every message is printed once
/// (the last line of a killed run may come once more: `killWindow`), in order, and nothing is
/// left undecryptable: a kill between the ratchet step and the hand-over no longer turns the
/// redelivered copy into a dropped duplicate.
final class EndToEndCrashTests: StoryProcessTestCase {
    static let total = 120
    static let killEvery = 30

    func testKillingAnEndToEndListenerDuringALiveStreamLosesNothing() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let server = "127.0.0.1:\(relay.port)"
        var runs = [try await startListening(bob, server: server)]
        let sender = try await endToEndSender(alice)
        let outcomes = Outcomes()
        let sending = Task { [total = Self.total] in
            try await sendPaced(total, from: sender, to: bob, tag: "live", every: .milliseconds(15), into: outcomes)
        }
        var killed: [ChildProcess] = []
        for round in 1..<(Self.total / Self.killEvery) {
            let reached = await Eventually.holds(within: storyBound) { Set(self.printed(by: runs)).count >= round * Self.killEvery }
            XCTAssertTrue(reached, runs.last!.standardError)
            runs.last!.signal(SIGKILL)
            _ = await runs.last!.exitStatus()
            killed.append(runs.last!)
            runs.append(try await startListening(bob, server: server))
        }
        let texts = try await sending.value
        try await assertOnceInOrder(texts, runs: runs, killed: killed)
        let settled = await Eventually.holds(within: .seconds(30)) { await outcomes.count == Self.total }
        XCTAssertTrue(settled)
        let failed = await outcomes.failed
        XCTAssertEqual(failed, [], "nothing fails when only the receiver restarts")
    }

    func testKillingAnEndToEndListenerDuringAnInboxFlushLosesNothing() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let server = "127.0.0.1:\(relay.port)"
        let publish = try await startListening(bob, server: server) // publishes bob's keys
        publish.signal(SIGTERM)
        _ = await publish.exitStatus()
        let sender = try await endToEndSender(alice)
        let outcomes = Outcomes()
        let texts = try await sendPaced(Self.total, from: sender, to: bob, tag: "inbox", every: .milliseconds(2), into: outcomes)
        let stored = await Eventually.holds(within: .seconds(30)) { await outcomes.count == Self.total }
        let summary = await outcomes.summary
        XCTAssertTrue(stored, summary)

        var runs = [try await startListening(bob, server: server)]
        var killed: [ChildProcess] = []
        for round in 1..<(Self.total / Self.killEvery) {
            let reached = await Eventually.holds(within: storyBound) { Set(self.printed(by: runs)).count >= round * Self.killEvery }
            XCTAssertTrue(reached, runs.last!.standardError)
            runs.last!.signal(SIGKILL)
            _ = await runs.last!.exitStatus()
            killed.append(runs.last!)
            runs.append(try await startListening(bob, server: server))
        }
        try await assertOnceInOrder(texts, runs: runs, killed: killed)
        let failed = await outcomes.failed, after = await outcomes.summary
        XCTAssertEqual(failed, [], after)
    }

    /// The same with bob's `simp chat`: its history has every message once, in order, and no
    /// message is shown twice.
    func testKillingAnEndToEndChatDuringALiveStreamKeepsEachMessageOnce() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        var runs = [try await startChatting(bob, with: alice)]
        let sender = try await endToEndSender(alice)
        let outcomes = Outcomes()
        let sending = Task { [total = Self.total] in
            try await sendPaced(total, from: sender, to: bob, tag: "chat", every: .milliseconds(15), into: outcomes)
        }
        for round in 1..<(Self.total / Self.killEvery) {
            let reached = await Eventually.holds(within: storyBound) { self.chatHistory(of: bob).count >= round * Self.killEvery }
            XCTAssertTrue(reached, runs.last!.chat.standardError)
            runs.last!.chat.signal(SIGKILL)
            _ = await runs.last!.chat.exitStatus()
            runs.append(try await startChatting(bob, with: alice))
        }
        let texts = try await sending.value
        try await assertEveryMessageOnce(texts, context: runs.map(\.chat.standardError).joined(separator: "\n---\n")) {
            self.chatHistory(of: bob)
        }
        XCTAssertEqual(chatHistory(of: bob), texts, "in order, once")
        let shown = printed(by: runs.map(\.chat)).filter { $0.hasPrefix("chat ") }
        XCTAssertEqual(shown.count, Set(shown).count, "a message shown twice")
        let failed = await outcomes.failed
        XCTAssertEqual(failed, [])
        for run in runs { try? run.input.close() }
    }

    /// bob's `$SIMP_HOME` is a small tmpfs that fills up while alice sends 20 messages: bob's
    /// listener shows them, but none is receipted (alice never sees one delivered) while the
    /// state cannot be written, and bob is told; once space returns all 20 are delivered, each
    /// printed once.
    func testAReceiverWhoseDiskIsFullReceiptsNothingUntilItCanStoreIt() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let disk = FileManager.default.temporaryDirectory.appendingPathComponent("simp-full-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: disk, withIntermediateDirectories: true)
        do { _ = try await ToolProcess.run("mount", ["-t", "tmpfs", "-o", "size=4m", "tmpfs", disk.path], in: disk) } catch {
            throw XCTSkip("cannot mount a tmpfs here (needs root): \(error)")
        }
        defer {
            _ = try? Process.run(URL(fileURLWithPath: "/bin/umount"), arguments: ["-l", disk.path]).waitUntilExit()
            try? FileManager.default.removeItem(at: disk)
        }
        let listen = try ChildProcess(
            "simp", ["listen", "--server", "127.0.0.1:\(relay.port)", "--user", bob, "--device", "phone"],
            environment: try await environment(bob).merging(["SIMP_HOME": disk.path]) { $1 })
        children.append(listen)
        let listening = await Eventually.holds { listen.standardError.contains("listening as") }
        XCTAssertTrue(listening, listen.standardError)
        let sender = try await endToEndSender(alice)
        let outcomes = Outcomes()
        let before = try await sendPaced(5, from: sender, to: bob, tag: "before", into: outcomes)
        let settled = await Eventually.holds { await outcomes.count == 5 }
        XCTAssertTrue(settled)

        let filler = disk.appendingPathComponent("filler")
        for (index, block) in ["64k", "4k", "1"].enumerated() { // until the disk is full, to the last byte
            _ = try? await ToolProcess.run("dd", ["if=/dev/zero", "of=\(filler.path).\(index)", "bs=\(block)"], in: disk)
        }
        // The journal's last page may still have room for a record or two: those are stored.
        var filling: [String] = []
        while !listen.standardError.contains("cannot write this device's end-to-end state"), filling.count < 40 {
            filling += try await sendPaced(1, from: sender, to: bob, tag: "filling \(filling.count + 1)", into: outcomes)
            try await Task.sleep(nanoseconds: 200_000_000) // paced: one message, then look for the listener's line
        }
        let full = try await sendPaced(20, from: sender, to: bob, tag: "full", every: .milliseconds(50), into: outcomes)
        let shown = await Eventually.holds { Set(self.printed(by: [listen])).isSuperset(of: full) }
        XCTAssertTrue(shown, listen.standardOutput + listen.standardError)
        _ = await Eventually.stays(for: .seconds(2)) { // quiet period: receipts would have come by now
            await !outcomes.byText.keys.contains { $0.hasPrefix("full") }
        }
        let deliveredWhileFull = await outcomes.byText.keys.filter { $0.hasPrefix("full") }
        XCTAssertEqual(deliveredWhileFull, [], "delivered (✓✓) though bob could not store it")
        XCTAssertTrue(listen.standardError.contains("cannot write this device's end-to-end state"), listen.standardError)

        for index in 0..<3 { try FileManager.default.removeItem(atPath: "\(filler.path).\(index)") }
        let expected = 25 + filling.count
        let delivered = await Eventually.holds(within: .seconds(60)) { await outcomes.count == expected }
        let summary = await outcomes.summary, failed = await outcomes.failed
        XCTAssertTrue(delivered, summary)
        XCTAssertEqual(failed, [], summary)
        try await assertEveryMessageOnce(before + filling + full, printedBy: [listen])
    }

    /// alice as a library client with end-to-end encryption on device "desk" (the same
    /// `$SIMP_HOME`), retransmitting without limit.
    private func endToEndSender(_ alice: String) async throws -> SIMPClient {
        try await relay.connectClient(user: alice) {
            $0.device = "desk"
            $0.retransmit.maxAttempts = nil
            $0.endToEnd = EndToEndSettings(home: self.home)
        }
    }

    /// Every one of `texts` printed over `runs` once (the last line of each killed run at most
    /// twice), first copies in the order sent, and no line about a message that could not be
    /// decrypted.
    private func assertOnceInOrder(_ texts: [String], runs: [ChildProcess], killed: [ChildProcess]) async throws {
        let repeatable = Set(killed.flatMap { printed(by: [$0]).suffix(Self.killWindow) })
        let errors = runs.map(\.standardError).joined(separator: "\n---\n")
        try await assertEveryMessageOnce(texts, context: errors, repeatable: repeatable) { self.printed(by: runs) }
        var seen = Set<String>(), firsts: [String] = []
        for text in printed(by: runs) where seen.insert(text).inserted { firsts.append(text) }
        XCTAssertEqual(firsts, texts.filter(seen.contains), "out of order")
        let undecryptable = runs.flatMap { $0.standardOutput.split(separator: "\n") + $0.standardError.split(separator: "\n") }
            .filter { $0.contains("could not be decrypted") }
        XCTAssertEqual(undecryptable, [])
    }
}
