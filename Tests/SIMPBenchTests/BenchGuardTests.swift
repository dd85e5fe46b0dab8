import Foundation
import SIMPBench
import SIMPTestSupport
import XCTest

/// `scripts/bench-guard`: instruction counts per message that repeat exactly, a failure when a
/// build does more work per message, and the verdicts at the 10 % line.
final class BenchGuardTests: XCTestCase {
    private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// A real run under callgrind, three times: the same binary counts the same instructions
    /// twice, and a build that does more per message (the workload's extra work inside every
    /// counted window) fails the guard, naming every phase.
    func testCountsRepeatExactlyAndASlowerBuildFailsTheGuard() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bench-guard-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let (first, second) = (directory.appendingPathComponent("first").path, directory.appendingPathComponent("second").path)
        let short = ["--only", "relay", "--relay-messages", "20"]

        let measured = try await guardScript(short + ["--baseline", first, "--update"])
        XCTAssertEqual(measured.status, 0, measured.output)
        let again = try await guardScript(short + ["--baseline", second, "--update"])
        XCTAssertEqual(again.status, 0, again.output)
        let counts = try InstructionGuard.parseBaseline(String(contentsOfFile: first, encoding: .utf8))
        XCTAssertEqual(counts.keys.sorted(), ["relay.datagram", "relay.file-chunk", "relay.receipt-datagram", "relay.receipt-frame", "relay.store"])
        XCTAssertEqual(
            try InstructionGuard.parseBaseline(String(contentsOfFile: second, encoding: .utf8)), counts, "the same binary, the same counts")

        // Each round of the extra work takes at least 5 instructions: 25 % more on the cheapest phase.
        let rounds = try XCTUnwrap(counts.values.min()) / 20
        let slowed = try await guardScript(short + ["--baseline", first, "--extra-work", "\(rounds)"])
        XCTAssertEqual(slowed.status, 1, slowed.output)
        XCTAssertTrue(
            slowed.output.contains(
                "FAIL: relay.datagram, relay.file-chunk, relay.receipt-datagram, relay.receipt-frame, relay.store grew by more than 10 %"),
            slowed.output)
    }

    func testHelpExplainsTheGuardAndUnknownFlagsAreRefused() async throws {
        let help = try await guardScript(["--help"])
        XCTAssertEqual(help.status, 0)
        for word in ["callgrind", "relay.datagram", "client.open", "10 %", "--update", "SWIFT_DETERMINISTIC_HASHING"] {
            XCTAssertTrue(help.output.contains(word), word)
        }
        let wrong = try await guardScript(["--frobnicate"])
        XCTAssertEqual(wrong.status, 2)
        let partialUpdate = try await guardScript(["--only", "relay", "--update"])
        XCTAssertEqual(partialUpdate.status, 2, "--update of the committed baseline with one workload would drop the other's lines")
    }

    func testGrowthAboveTheToleranceFailsAndADropAboveItPassesWithANote() {
        let baseline: InstructionGuard.Counts = ["a": 1000, "b": 1000, "c": 1000, "d": 1000, "gone": 5]
        let lines = InstructionGuard.compare(measured: ["a": 1100, "b": 1101, "c": 899, "d": 900, "new": 7], baseline: baseline)
        XCTAssertEqual(lines.map(\.name), ["a", "b", "c", "d", "gone", "new"])
        XCTAssertEqual(lines.map(\.verdict), [.within, .grew, .dropped, .within, .missing, .new])
        XCTAssertFalse(InstructionGuard.passes(lines))
        XCTAssertFalse(InstructionGuard.passes(InstructionGuard.compare(measured: ["a": 1101], baseline: ["a": 1000])))
        XCTAssertTrue(InstructionGuard.passes(InstructionGuard.compare(measured: ["a": 899, "b": 1100], baseline: ["a": 1000, "b": 1000])))
        XCTAssertFalse(InstructionGuard.passes(InstructionGuard.compare(measured: ["a": 1000], baseline: ["a": 1000, "b": 1])), "a phase gone")

        let report = InstructionGuard.report(lines, baselineFile: "scripts/bench-guard.debug.baseline")
        XCTAssertTrue(report.contains("FAIL: b grew by more than 10 % over scripts/bench-guard.debug.baseline"), report)
        XCTAssertTrue(report.contains("NOTE: c dropped by more than 10 %: if that is expected, run scripts/bench-guard --update"), report)
        XCTAssertTrue(report.contains("FAIL: the baseline and the workloads name different phases"), report)
        let dropOnly = InstructionGuard.report(InstructionGuard.compare(measured: ["a": 500], baseline: ["a": 1000]), baselineFile: "f")
        XCTAssertFalse(dropOnly.contains("FAIL"), dropOnly)
        XCTAssertTrue(dropOnly.contains("-50.0 %"), dropOnly)
    }

    func testTheBaselineFileRoundTripsAndABadLineIsNamed() throws {
        let counts: InstructionGuard.Counts = ["relay.datagram": 215_737, "client.seal": 1_229_198]
        let text = InstructionGuard.baselineText(counts, header: ["what was measured"])
        XCTAssertEqual(text, "# what was measured\nclient.seal 1229198\nrelay.datagram 215737\n")
        XCTAssertEqual(try InstructionGuard.parseBaseline(text), counts)
        XCTAssertThrowsError(try InstructionGuard.parseBaseline("# fine\nrelay.datagram 12x\n")) { error in
            XCTAssertTrue("\(error)".contains("baseline line 2"), "\(error)")
        }
    }

    func testADumpGivesItsPhaseAndTotalAndTheExitDumpIsSkipped() throws {
        let dump =
            "version: 1\ncreator: callgrind-3.19.0\ndesc: Trigger: Client Request: relay.datagram/200\nevents: Ir\nsummary: 43124342\ntotals: 43124342\n"
        let phase = try XCTUnwrap(InstructionGuard.phase(inDump: dump, file: "callgrind.out.1"))
        XCTAssertEqual(phase.name, "relay.datagram")
        XCTAssertEqual(phase.messages, 200)
        XCTAssertEqual(phase.total, 43_124_342)
        XCTAssertNil(try InstructionGuard.phase(inDump: "desc: Trigger: Program termination\ntotals: 5\n", file: "callgrind.out"))
        XCTAssertThrowsError(try InstructionGuard.phase(inDump: "desc: Trigger: Client Request: a/2\n", file: "callgrind.out.3"))
    }

    private func guardScript(_ arguments: [String]) async throws -> (status: Int32, output: String) {
        try await ToolProcess.outcome(
            root.appendingPathComponent("scripts/bench-guard"), arguments, in: root, standardError: .combined)
    }
}
