import Foundation
import NIOConcurrencyHelpers
import NIOCore
import SIMPClient
import SIMPCore
import SIMPLocalServers
import SIMPTestSupport
import XCTest

/// The crash-safety bar: a stream of 300 messages from alice to bob while the receiver
/// (`simp listen`), the relay (`simp-server`) or the sender (`simp send --lines`) is killed
/// with `kill -9` and started again. bob's printed output over all runs has every message,
/// each once — except that the last line the killed listener printed may be printed once more
/// by the next run, if the kill fell between writing it and recording it (`killWindow`) — and
/// what the sender was told matches what arrived. bob's `simp chat` killed the same way has
/// every message in its history exactly once.
final class CrashSafetyTests: StoryProcessTestCase {
    static let total = 300

    /// Story: bob's `simp listen` is killed after printing 100 of alice's 300 messages and
    /// started again on the same device.
    func testKillingTheReceiverMidStreamLosesAndRepeatsNothing() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let server = "127.0.0.1:\(relay.port)"
        let first = try await startListening(bob, server: server)
        let sender = try await relay.connectClient(user: alice) { $0.retransmit.maxAttempts = nil }
        let outcomes = Outcomes()
        let sending = Task { [total = Self.total] in try await sendPaced(total, from: sender, to: bob, tag: "recv", into: outcomes) }

        let someArrived = await Eventually.holds(within: .seconds(30)) { self.printed(by: [first]).count >= 100 }
        XCTAssertTrue(someArrived, first.standardError)
        first.signal(SIGKILL)
        _ = await first.exitStatus()
        let beforeKill = printed(by: [first]).count
        let second = try await startListening(bob, server: server)
        let texts = try await sending.value

        try await assertEveryMessageOnce(texts, printedBy: [first, second], killed: first)
        let settled = await Eventually.holds { await outcomes.count == Self.total }
        let known = await outcomes.count, failed = await outcomes.failed, summary = await outcomes.summary
        XCTAssertTrue(settled, "outcomes known: \(known) of \(Self.total)")
        XCTAssertEqual(failed, [], "nothing fails when only the receiver restarts")
        print("crash-safety receiver: first run printed \(beforeKill), second \(printed(by: [second]).count); outcomes \(summary)")
    }

    /// Story: bob listens on two devices ("phone" and "laptop"); the laptop's `simp listen` is
    /// killed after printing 100 of alice's 300 messages and started again. Each device prints
    /// every message once (the laptop over both its runs), and alice is told delivered or stored
    /// for every one, never failed.
    func testKillingOneOfTwoDevicesMidStreamLosesAndRepeatsNothingAtEither() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let server = "127.0.0.1:\(relay.port)"
        let phone = try await startListening(bob, server: server, device: "phone")
        let laptop = try await startListening(bob, server: server, device: "laptop")
        let sender = try await relay.connectClient(user: alice) { $0.retransmit.maxAttempts = nil }
        let notices = NoticeLog(sender)
        let outcomes = Outcomes()
        let sending = Task { [total = Self.total] in try await sendPaced(total, from: sender, to: bob, tag: "devices", into: outcomes) }

        let someArrived = await Eventually.holds(within: .seconds(30)) { self.printed(by: [laptop]).count >= 100 }
        XCTAssertTrue(someArrived, laptop.standardError)
        laptop.signal(SIGKILL)
        _ = await laptop.exitStatus()
        let beforeKill = printed(by: [laptop]).count
        let laptopAgain = try await startListening(bob, server: server, device: "laptop")
        let texts = try await sending.value

        try await assertEveryMessageOnce(texts, printedBy: [phone])
        try await assertEveryMessageOnce(texts, printedBy: [laptop, laptopAgain], killed: laptop)
        let settled = await Eventually.holds { await outcomes.count == Self.total }
        let known = await outcomes.count, failed = await outcomes.failed, summary = await outcomes.summary
        XCTAssertTrue(settled, "outcomes known: \(known) of \(Self.total)")
        XCTAssertEqual(failed, [], "nothing fails when one device restarts")
        // Stored (the relay holds it for bob's devices) is followed by delivered, never discarded.
        let stored = Set(await outcomes.byText.values.compactMap { if case .stored(let id, _) = $0 { return id } else { return nil } })
        let toldDelivered = await Eventually.holds {
            Set(await notices.notices.compactMap { if case .delivered(let id, _) = $0 { return id } else { return nil } }).isSuperset(of: stored)
        }
        XCTAssertTrue(toldDelivered, "a stored message never reported delivered")
        let discarded = await notices.notices.filter { if case .discarded = $0 { return true } else { return false } }
        XCTAssertEqual(discarded, [])
        print(
            "crash-safety two devices: the laptop printed \(beforeKill) before the kill, \(printed(by: [laptopAgain]).count) after; "
                + "the phone \(printed(by: [phone]).count); outcomes \(summary)")
    }

    /// Story: bob's `simp chat` (reading a script from a pipe) is killed after its history has
    /// 100 of alice's 300 messages and started again on the same device. Its history has every
    /// message exactly once (each is appended before its receipt; a copy delivered again after
    /// the kill is recognised), and no message is printed twice.
    func testKillingTheChatReceiverMidStreamKeepsEachMessageOnceInItsHistory() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let first = try await startChatting(bob, with: alice)
        let sender = try await relay.connectClient(user: alice) { $0.retransmit.maxAttempts = nil }
        let outcomes = Outcomes()
        let sending = Task { [total = Self.total] in try await sendPaced(total, from: sender, to: bob, tag: "chat", into: outcomes) }

        let someArrived = await Eventually.holds(within: .seconds(30)) { self.chatHistory(of: bob).count >= 100 }
        XCTAssertTrue(someArrived, first.chat.standardError)
        first.chat.signal(SIGKILL)
        _ = await first.chat.exitStatus()
        let beforeKill = chatHistory(of: bob).count
        let second = try await startChatting(bob, with: alice)
        let texts = try await sending.value

        try await assertEveryMessageOnce(texts, context: first.chat.standardError + second.chat.standardError) { self.chatHistory(of: bob) }
        let shown = printed(by: [first.chat, second.chat]).filter { $0.hasPrefix("chat ") }
        XCTAssertEqual(shown.count, Set(shown).count, "a message shown twice")
        let settled = await Eventually.holds { await outcomes.count == Self.total }
        let known = await outcomes.count, failed = await outcomes.failed, summary = await outcomes.summary
        XCTAssertTrue(settled, "outcomes known: \(known) of \(Self.total)")
        XCTAssertEqual(failed, [], "nothing fails when only the receiver restarts")
        print("crash-safety chat: the history had \(beforeKill) at the kill; \(shown.count) shown over both runs; outcomes \(summary)")
        for run in [first, second] { try? run.input.close() }
    }

    /// Story: the relay (`simp-server`, its own process) is killed after bob printed 100 of the
    /// 300 messages and started again 1 s later on the same ports with the same Redis.
    func testKillingTheRelayMidStreamLosesNothingAndTheSenderIsToldTheTruth() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let port = try FreePort.tcp(), udpPort = try FreePort.udp()
        let relayId = "crash-\(UInt32.random(in: .min ... .max))"
        let arguments = ["--port", String(port), "--udp-port", String(udpPort), "--redis", relay.redis.url.description, "--relay-id", relayId]
        let relayProcess = try await startServer(arguments)
        let receiver = try await startListening(bob, server: "127.0.0.1:\(port)")
        try await relay.addUser(alice)
        var configuration = TestRelay.clientConfiguration(user: alice, port: port)
        configuration.retransmit.maxAttempts = nil
        let sender = SIMPClient(configuration: configuration)
        try await sender.connect()
        let outcomes = Outcomes()
        let sending = Task { [total = Self.total] in try await sendPaced(total, from: sender, to: bob, tag: "relay", into: outcomes) }

        let someArrived = await Eventually.holds(within: .seconds(30)) { self.printed(by: [receiver]).count >= 100 }
        XCTAssertTrue(someArrived, receiver.standardError)
        relayProcess.signal(SIGKILL)
        _ = await relayProcess.exitStatus()
        let beforeKill = printed(by: [receiver]).count
        try await Task.sleep(nanoseconds: 1_000_000_000) // the outage itself: the relay is gone for 1 s
        let restarted = try await startServer(arguments)
        let texts = try await sending.value

        try await assertEveryMessageOnce(texts, printedBy: [receiver])
        let settled = await Eventually.holds(within: .seconds(30)) { await outcomes.count == Self.total }
        let known = await outcomes.count, summary = await outcomes.summary
        XCTAssertTrue(settled, "outcomes known: \(known) of \(Self.total)")
        let arrived = Set(printed(by: [receiver]))
        for (text, outcome) in await outcomes.byText {
            switch outcome {
            case .delivered, .stored: XCTAssertTrue(arrived.contains(text), "\(text) reported \(outcome) but never printed")
            case .failed, .connectionLost: XCTAssertFalse(arrived.contains(text), "\(text) reported \(outcome) but printed")
            }
        }
        print("crash-safety relay: printed \(beforeKill) before the kill; outcomes \(summary)")
        await sender.close()
        restarted.signal(SIGTERM)
        _ = await restarted.exitStatus()
    }

    /// Story: alice's `simp send --lines` is killed after printing at least half of its 300
    /// messages as submitted, while bob's receiver is paused (so some are unreceipted), then
    /// `simp send` runs again on the same device and resends its outbox.
    func testKillingTheSenderMidStreamLeavesTheRestForTheNextSendOnThatDevice() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let server = "127.0.0.1:\(relay.port)"
        let receiver = try await startListening(bob, server: server)
        let environment = try await environment(alice)
        let input = home.appendingPathComponent("lines.txt")
        let texts = (1...Self.total).map { "send \($0)" }
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        try (texts.joined(separator: "\n") + "\n").write(to: input, atomically: true, encoding: .utf8)
        let sendArguments = ["send", "--no-e2e", "--server", server, "--user", alice, "--device", "desk", "--to", bob]

        receiver.signal(SIGSTOP) // no receipts for now: the sender has messages in flight when killed
        let first = try ChildProcess(
            "simp", sendArguments + ["--lines"], environment: environment,
            standardInput: try FileHandle(forReadingFrom: input))
        children.append(first)
        let halfSubmitted = await Eventually.holds(within: .seconds(30)) { Self.submittedIds(first.standardOutput).count >= Self.total / 2 }
        first.signal(SIGKILL)
        _ = await first.exitStatus()
        receiver.signal(SIGCONT)
        XCTAssertTrue(halfSubmitted, first.standardError)
        let submitted = Self.submittedIds(first.standardOutput)
        let leftInOutbox = try Outbox(home: home, user: alice, device: "desk").count
        XCTAssertGreaterThan(leftInOutbox, 0, "killed with messages unreceipted")

        let started = NIODeadline.now()
        let second = try ChildProcess("simp", sendArguments + ["after the crash"], environment: environment)
        children.append(second)
        // Usually ~1 s; in about 1 run of 4 the receipt of one resent message (the last one the
        // dead process saved) takes ~30 s, the receiver's ordering hold limit: not yet explained.
        let status = await second.exitStatus(timeout: 60)
        let took = Double((NIODeadline.now() - started).nanoseconds) / 1e9
        XCTAssertEqual(status, 0, second.standardError)
        XCTAssertTrue(second.standardError.contains("left in the outbox by an earlier simp"), second.standardError)
        // Submitted but not yet flushed to stdout when killed: in the outbox too, so these may arrive (once).
        try await assertEveryMessageOnce(Array(texts.prefix(submitted.count)) + ["after the crash"], allowing: texts, printedBy: [receiver])
        XCTAssertEqual(try Outbox(home: home, user: alice, device: "desk").count, 0, "everything settled leaves the outbox")
        print(
            "crash-safety sender: \(submitted.count) submitted before the kill, \(leftInOutbox) left in the outbox, "
                + "the next simp send took \(String(format: "%.1f", took)) s")
    }

    // MARK: - Helpers

    /// The ids `simp send` printed as submitted (`message ID to USER`), in order.
    static func submittedIds(_ output: String) -> [UInt64] {
        output.split(separator: "\n").compactMap { line in
            let words = line.split(separator: " ")
            guard words.count == 4, words[0] == "message", words[2] == "to" else { return nil }
            return UInt64(words[1])
        }
    }
}
