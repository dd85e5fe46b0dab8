import Foundation
import NIOCore
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// How long a story waits for thousands of messages to settle: four times `Eventually.generousBound`,
/// since a story sends for 10-20 s and a loaded machine (a load average of 25 on 2 cores) takes
/// minutes for what takes seconds alone. A wait for a condition costs only the time it takes.
let storyBound: TimeAmount = .seconds(120)

/// Story tests with real processes: `simp-server` and `simp listen` run as child
/// processes (killed after each test); helpers read what `simp listen` printed.
class StoryProcessTestCase: ClientHomeTestCase {
    var children: [ChildProcess] = []

    override func tearDown() async throws {
        for child in children {
            child.signal(SIGCONT) // a paused one dies too
            child.signal(SIGKILL)
            _ = await child.exitStatus(timeout: 5)
        }
        try await super.tearDown()
    }

    /// Starts `simp listen` for `user` on `device` (with `extraEnvironment`, e.g. the UDP-blocking
    /// shim's) and waits until it is listening.
    func startListening(_ user: String, server: String, device: String = "phone", extraEnvironment: [String: String] = [:]) async throws
        -> ChildProcess
    {
        let listen = try ChildProcess(
            // --allow-plaintext: these stories send from clients without end-to-end encryption.
            "simp", ["listen", "--server", server, "--user", user, "--device", device, "--allow-plaintext"],
            environment: try await environment(user).merging(extraEnvironment) { $1 })
        children.append(listen)
        let listening = await Eventually.holds { listen.standardError.contains("listening as") }
        XCTAssertTrue(listening, listen.standardError)
        return listen
    }

    /// Starts `simp chat` for `user` on device "phone", talking to `peer`, reading lines from a
    /// pipe (kept open: the chat runs until killed), and waits until it is connected.
    func startChatting(_ user: String, with peer: String) async throws -> (chat: ChildProcess, input: FileHandle) {
        let pipe = Pipe()
        let chat = try ChildProcess(
            "simp", ["chat", "--server", "127.0.0.1:\(relay.port)", "--user", user, "--device", "phone", "--to", peer],
            environment: try await environment(user).merging(["NO_COLOR": "1"]) { $1 }, standardInput: pipe.fileHandleForReading)
        children.append(chat)
        let connected = await Eventually.holds { chat.standardOutput.contains("-- connected as \(user)") }
        XCTAssertTrue(connected, chat.standardOutput + chat.standardError)
        return (chat, pipe.fileHandleForWriting)
    }

    /// The texts of the messages in `user`'s chat history (`$SIMP_HOME/history/USER.jsonl`) it
    /// received, in order; lines still being written are left out.
    func chatHistory(of user: String) -> [String] {
        let file = home.appendingPathComponent("history").appendingPathComponent(user + ".jsonl")
        guard let data = FileManager.default.contents(atPath: file.path) else { return [] }
        return data.split(separator: UInt8(ascii: "\n")).compactMap { line in
            guard let entry = try? JSONSerialization.jsonObject(with: line) as? [String: Any],
                entry["status"] == nil, entry["from"] as? String != user
            else { return nil }
            return entry["text"] as? String
        }
    }

    /// The relay's `message_rate_limited` refusals, from its metrics endpoint.
    func rateLimitRefusals(_ metricsPort: Int) async throws -> Double {
        let text = try await ToolProcess.run("curl", ["-sf", "http://127.0.0.1:\(metricsPort)/metrics"], in: FileManager.default.temporaryDirectory)
        let series = text.split(separator: "\n").first { $0.hasPrefix("simp_rejected_total{reason=\"message_rate_limited\"}") }
        return try XCTUnwrap(series.flatMap { $0.split(separator: " ").last }.flatMap { Double($0) }, "no message_rate_limited series in\n\(text)")
    }
    /// Starts `simp-server` with `arguments` and waits until it listens.
    func startServer(_ arguments: [String]) async throws -> ChildProcess {
        let server = try ChildProcess("simp-server", arguments)
        children.append(server)
        let listening = await Eventually.holds { server.standardError.contains("relay listening") }
        XCTAssertTrue(listening, server.standardError)
        return server
    }

    /// The message texts `simp listen` printed (`[HH:mm:ss] FROM: TEXT`), complete lines only, in order.
    func printed(by runs: [ChildProcess]) -> [String] {
        runs.flatMap { run -> [String] in
            var lines = run.standardOutput.split(separator: "\n", omittingEmptySubsequences: false)
            lines.removeLast() // after the last newline: empty, or a line still being written
            return lines.compactMap { line in line.range(of: ": ").map { String(line[$0.upperBound...]) } }
        }
    }

    /// Waits until every one of `texts` was printed, waits a little more for late copies, and
    /// checks each was printed exactly once, and nothing else was but `allowed` ones, at most once.
    func assertEveryMessageOnce(
        _ texts: [String], allowing allowed: [String] = [], printedBy runs: [ChildProcess],
        within limit: TimeAmount = storyBound, killed: ChildProcess? = nil,
        file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        let errors = runs.map(\.standardError).joined(separator: "\n---\n")
        let cutOff = killed.map { Set(printed(by: [$0]).suffix(Self.killWindow)) } ?? []
        try await assertEveryMessageOnce(texts, allowing: allowed, within: limit, context: errors, repeatable: cutOff, file: file, line: line) {
            self.printed(by: runs)
        }
    }

    /// How many of the last lines a `kill -9`ed `simp listen` printed may come again in the
    /// next run: the last one. Each message is printed, then added to the listener's record
    /// (`DeliveredRecord`), then receipted; the next run skips what the record has, so only a
    /// kill between writing a line and recording it (two `write` calls) leaves a printed
    /// message unrecorded and unreceipted, which the relay delivers again. Exactly once on a
    /// pipe would need the print and the record to be one atomic step.
    static let killWindow = 1

    /// The same check of what `received()` returns (the texts an application got, in order).
    func assertEveryMessageOnce(
        _ texts: [String], allowing allowed: [String] = [], within limit: TimeAmount = storyBound,
        context: @autoclosure () -> String = "", repeatable: Set<String> = [],
        file: StaticString = #filePath, line: UInt = #line,
        received: () async -> [String]
    ) async throws {
        let all = await Eventually.holds(within: limit) { Set(await received()).isSuperset(of: texts) }
        let settled = await received().count
        _ = await Eventually.stays(for: .milliseconds(1500)) { await received().count == settled } // quiet period: copies still on their way
        let seen = await received()
        var counts: [String: Int] = [:]
        for text in seen { counts[text, default: 0] += 1 }
        let missing = texts.filter { counts[$0] == nil }
        let repeated = counts.filter { $0.value > (repeatable.contains($0.key) ? 2 : 1) }.map(\.key).sorted()
        let cutOff = counts.filter { $0.value == 2 && repeatable.contains($0.key) }.count
        if cutOff > 0 { print("printed again after the kill (its receipt was cut off): \(cutOff)") }
        let unexpected = Set(seen).subtracting(texts).subtracting(allowed).sorted()
        XCTAssertTrue(all, "missing \(missing.count) of \(texts.count): \(missing.prefix(20))\n\(context().suffix(4000))", file: file, line: line)
        XCTAssertEqual(repeated, [], "printed more than once (\(repeated.count))", file: file, line: line)
        XCTAssertEqual(unexpected, [], "printed but never sent", file: file, line: line)
    }
}

/// What the sender was told about each message, by text.
actor Outcomes {
    private(set) var byText: [String: SendResult] = [:]

    func record(_ text: String, _ outcome: SendResult) { byText[text] = outcome }

    var count: Int { byText.count }

    /// The texts whose outcome was a failure (or an unknown fate: the connection was lost).
    var failed: [String] {
        byText.filter { if case .delivered = $0.value { return false } else if case .stored = $0.value { return false } else { return true } }
            .map(\.key).sorted()
    }

    /// How many of each outcome, e.g. "delivered 290, stored 10".
    var summary: String {
        var kinds: [String: Int] = [:]
        for outcome in byText.values {
            switch outcome {
            case .delivered: kinds["delivered", default: 0] += 1
            case .stored: kinds["stored", default: 0] += 1
            case .failed: kinds["failed", default: 0] += 1
            case .connectionLost: kinds["connectionLost", default: 0] += 1
            }
        }
        return kinds.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
    }
}

/// Submits `total` messages "TAG N" to `user`, one every `interval`, recording each outcome;
/// returns the texts. `beforeEach(N)` runs before message N is submitted.
func sendPaced(
    _ total: Int, from client: SIMPClient, to user: String, tag: String, every interval: TimeAmount = .milliseconds(8),
    into outcomes: Outcomes, beforeEach: @Sendable (Int) async -> Void = { _ in }
) async throws -> [String] {
    var texts: [String] = []
    let start = NIODeadline.now()
    for number in 1...total {
        await beforeEach(number)
        let text = "\(tag) \(number)"
        let (_, result) = try await client.submit(SIMPMessage(kind: .text, toUser: user, content: text))
        result.whenSuccess { outcome in Task { await outcomes.record(text, outcome) } }
        texts.append(text)
        // On schedule rather than a fixed sleep after each: a late wake-up is made up.
        let due = start + .nanoseconds(interval.nanoseconds * Int64(number))
        let wait = due - .now()
        if wait > .zero { try await Task.sleep(nanoseconds: UInt64(wait.nanoseconds)) } // paced
    }
    return texts
}
