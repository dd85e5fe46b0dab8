import Foundation
import XCTest

/// `scripts/bench-compare` and its C tools, without the long comparison (speed is never asserted):
/// the script explains itself and refuses unknown flags, the tools build, and `udplimit` reports.
final class BenchCompareScriptTests: XCTestCase {
    private let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    func testHelpExplainsTheComparisonAndUnknownFlagsAreRefused() throws {
        let help = try run(root.appendingPathComponent("scripts/bench-compare").path, ["--help"])
        XCTAssertEqual(help.status, 0)
        for word in ["--short", "--json", "udplimit", "mosquitto", "simp-bench", "<= 0.5", ">= 1.5"] {
            XCTAssertTrue(help.output.contains(word), word)
        }
        let wrong = try run(root.appendingPathComponent("scripts/bench-compare").path, ["--frobnicate"])
        XCTAssertEqual(wrong.status, 2)
    }

    func testBenchLatencyExplainsItselfAndRefusesWhatItCannotRun() throws {
        let script = root.appendingPathComponent("scripts/bench-latency").path
        let help = try run(script, ["--help"])
        XCTAssertEqual(help.status, 0)
        for word in ["VARIANT", "--messages-per-tick", "send -> delivered", "interleaved"] where !help.output.lowercased().contains(word.lowercased()) {
            XCTFail("--help lacks \(word)")
        }
        XCTAssertEqual(try run(script, ["--frobnicate"]).status, 2)
        XCTAssertEqual(try run(script, []).status, 2, "no variant")
    }

    func testTheToolsBuildAndUDPLimitReportsOneJSONObject() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bench-compare-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let udplimit = directory.appendingPathComponent("udplimit").path
        let mqttbench = directory.appendingPathComponent("mqttbench").path
        XCTAssertEqual(try run("/usr/bin/env", ["cc", "-O2", "-pthread", "-o", udplimit, root.appendingPathComponent("tools/udplimit.c").path]).status, 0)
        XCTAssertEqual(try run("/usr/bin/env", ["cc", "-O2", "-pthread", "-o", mqttbench,
                                                root.appendingPathComponent("tools/mqttbench.c").path, "-lmosquitto"]).status, 0)

        let report = try run(udplimit, ["0.2", "200"])
        XCTAssertEqual(report.status, 0)
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(report.output.utf8)) as? [String: Any])
        XCTAssertEqual(object["size"] as? Int, 200)
        XCTAssertGreaterThan(try XCTUnwrap(object["delivered_rate"] as? Double), 0, "datagrams went through")
        XCTAssertEqual(try run(mqttbench, ["--help"]).status, 0)
        XCTAssertEqual(try run(mqttbench, ["--pairs", "3"]).status, 2, "no --port")
    }

    private func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }
}
