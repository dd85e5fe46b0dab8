import Foundation
import NIOCore
import SIMPLocalServers
import SIMPTestSupport
import XCTest

/// `LaunchedProcess`, the launcher of children that outlive a call (redis-server, relays, `simp`
/// under test): exit statuses, signals, the timeout that kills, captured output.
final class LaunchedProcessTests: XCTestCase {
    private let shell = URL(fileURLWithPath: "/bin/sh")

    func testTheExitStatusIsAwaitedAndKept() async throws {
        let child = try LaunchedProcess(shell, ["-c", "exit 3"])
        let status = await child.exitStatus()
        XCTAssertEqual(status, 3)
        XCTAssertEqual(child.exitedStatus, 3)
        child.signal(SIGKILL) // after the exit: nothing is sent, the status stays
        XCTAssertEqual(child.exitedStatus, 3)
    }

    func testAChildStillRunningAtTheTimeoutIsKilledAndNoStatusReturned() async throws {
        // exec: Foundation's Process reports a killed shell's exit only once a child it left
        // behind (sleep) has ended too.
        let child = try LaunchedProcess(shell, ["-c", "exec sleep 30"])
        XCTAssertNil(child.exitedStatus, "running")
        let status = await child.exitStatus(within: .milliseconds(200))
        XCTAssertNil(status, "killed at the timeout")
        XCTAssertEqual(child.exitedStatus, SIGKILL)
    }

    func testStopSendsTheSignalAndReturnsTheStatus() async throws {
        let child = try LaunchedProcess(shell, ["-c", "exec sleep 30"])
        child.signal(SIGSTOP)
        let status = await child.stop(signal: SIGKILL, timeout: .seconds(20))
        XCTAssertEqual(status, SIGKILL, "a stopped child is killed all the same")
    }

    func testOutputGoesToTheGivenFileAndTheEnvironmentIsTheOneGiven() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("launched-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: file.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: file) }
        let child = try LaunchedProcess(
            shell, ["-c", "echo \"out $GREETING\"; echo err >&2"], environment: ["GREETING": "hello"],
            standardOutput: try FileHandle(forWritingTo: file))
        let status = await child.exitStatus()
        XCTAssertEqual(status, 0)
        XCTAssertEqual(try String(contentsOf: file, encoding: .utf8), "out hello\n", "standard error went to the null device")
    }
}

/// `ToolProcess`, one-shot tools through swift-subprocess: status, output, standard error.
final class ToolProcessTests: XCTestCase {
    private let shell = URL(fileURLWithPath: "/bin/sh")

    func testOutcomeReportsStatusAndTheChosenStreams() async throws {
        let script = "echo out; echo err >&2; exit 4"
        let combined = try await ToolProcess.outcome(shell, ["-c", script], standardError: .combined)
        XCTAssertEqual(combined.status, 4)
        XCTAssertEqual(combined.output, "out\nerr\n")
        let discarded = try await ToolProcess.outcome(shell, ["-c", script])
        XCTAssertEqual(discarded.output, "out\n")
        let errorOnly = try await ToolProcess.outcome(shell, ["-c", script], standardError: .only)
        XCTAssertEqual(errorOnly.output, "err\n")
    }

    func testEnvironmentDirectoryAndASignalAsAShellReportsIt() async throws {
        let directory = FileManager.default.temporaryDirectory
        let seen = try await ToolProcess.outcome(shell, ["-c", "echo \"$GREETING\"; pwd -P"], environment: ["GREETING": "hi"], in: directory)
        XCTAssertEqual(seen.output, "hi\n\(directory.resolvingSymlinksInPath().path)\n")
        let killed = try await ToolProcess.outcome(shell, ["-c", "kill -KILL $$"])
        XCTAssertEqual(killed.status, 128 + SIGKILL)
    }

    func testRunThrowsWithTheOutputOnFailure() async throws {
        do {
            try await ToolProcess.run("sh", ["-c", "echo broken; exit 1"], in: FileManager.default.temporaryDirectory)
            XCTFail("a failing tool must throw")
        } catch {
            XCTAssertTrue("\(error)".contains("failed (1): broken"), "\(error)")
        }
    }
}
