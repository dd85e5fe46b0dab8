import Foundation
import Logging
import NIOConcurrencyHelpers
import SIMPRelay
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// `--log-format json`: every record is one line that a JSON parser reads back exactly.
final class JSONLogHandlerTests: XCTestCase {
    /// Lines written by handlers made with `logger(...)`.
    private let lines = NIOLockedValueBox<[String]>([])

    private func logger(
        level: Logger.Level = .info, provider: Logger.MetadataProvider? = nil,
        seconds: Int = 1_795_255_557, nanoseconds: Int = 7_000_000
    ) -> Logger {
        let lines = self.lines
        return Logger(label: "simp.relay") { label in
            var handler = JSONLogHandler(
                label: label, metadataProvider: provider,
                clock: { timespec(tv_sec: seconds, tv_nsec: nanoseconds) },
                write: { line in lines.withLockedValue { $0.append(line) } })
            handler.logLevel = level
            return handler
        }
    }

    private func objects() throws -> [[String: Any]] {
        try lines.withLockedValue { $0 }.map { line in
            XCTAssertTrue(line.hasSuffix("}\n"), line)
            XCTAssertEqual(line.filter { $0 == "\n" }.count, 1, "one record, one line: \(line)")
            return try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }
    }

    func testARecordIsOneObjectWithTimeLevelLoggerMessageAndMetadata() throws {
        logger().info("user connected", metadata: ["user": "alice", "udp": "127.0.0.1:5001", "count": .stringConvertible(3)])
        let record = try XCTUnwrap(try objects().first)
        XCTAssertEqual(record["time"] as? String, "2026-11-21T10:05:57.007Z")
        XCTAssertEqual(record["level"] as? String, "info")
        XCTAssertEqual(record["logger"] as? String, "simp.relay")
        XCTAssertEqual(record["message"] as? String, "user connected")
        XCTAssertEqual(record["user"] as? String, "alice")
        XCTAssertEqual(record["udp"] as? String, "127.0.0.1:5001")
        XCTAssertEqual(record["count"] as? String, "3")
        XCTAssertEqual(Set(record.keys), ["time", "level", "logger", "message", "user", "udp", "count"])
        XCTAssertTrue(
            lines.withLockedValue { $0[0] }.hasPrefix(
                #"{"time":"2026-11-21T10:05:57.007Z","level":"info","logger":"simp.relay","message":"user connected","count":"3","udp""#),
            "fixed fields first, then metadata in key order")
    }

    func testHostileTextStaysOneParsableLine() throws {
        let nasty = "quote \" backslash \\ newline \n cr \r tab \t bell \u{07} nul \u{0} 日本語 🎉"
        logger().warning("\(nasty)", metadata: [nasty: .string(nasty)])
        let record = try XCTUnwrap(try objects().first)
        XCTAssertEqual(record["message"] as? String, nasty)
        XCTAssertEqual(record[nasty] as? String, nasty)
        XCTAssertTrue(lines.withLockedValue { $0[0] }.contains(#"\u0007"#))
    }

    func testNestedMetadataBecomesJSONArraysAndObjects() throws {
        logger().notice("nested", metadata: ["list": ["a", .dictionary(["k": "v"])], "map": ["z": "1", "a": ["x"]]])
        let record = try XCTUnwrap(try objects().first)
        let list = try XCTUnwrap(record["list"] as? [Any])
        XCTAssertEqual(list.first as? String, "a")
        XCTAssertEqual((list.last as? [String: String])?["k"], "v")
        let map = try XCTUnwrap(record["map"] as? [String: Any])
        XCTAssertEqual(map["z"] as? String, "1")
        XCTAssertEqual(map["a"] as? [String], ["x"])
    }

    func testRecordMetadataOverridesProviderWhichOverridesTheLoggers() throws {
        let provider = Logger.MetadataProvider { ["relay": "from-provider", "trace": "t1"] }
        var log = logger(provider: provider)
        log[metadataKey: "relay"] = "from-logger"
        log[metadataKey: "node"] = "n1"
        log.info("merged", metadata: ["trace": "t2"])
        let record = try XCTUnwrap(try objects().first)
        XCTAssertEqual(record["relay"] as? String, "from-provider")
        XCTAssertEqual(record["trace"] as? String, "t2")
        XCTAssertEqual(record["node"] as? String, "n1")
    }

    func testMetadataNamedLikeAFixedFieldIsRenamed() throws {
        logger().error("real message", metadata: ["message": "spoofed", "level": "spoofed", "time": "spoofed"])
        let record = try XCTUnwrap(try objects().first)
        XCTAssertEqual(record["message"] as? String, "real message")
        XCTAssertEqual(record["level"] as? String, "error")
        XCTAssertEqual(record["metadata_message"] as? String, "spoofed")
        XCTAssertEqual(record["metadata_level"] as? String, "spoofed")
        XCTAssertEqual(record["metadata_time"] as? String, "spoofed")
    }

    func testRecordsBelowTheLevelAreNotWritten() throws {
        let log = logger(level: .notice)
        log.debug("hidden")
        log.info("hidden")
        log.notice("shown")
        log.critical("shown too")
        XCTAssertEqual(try objects().map { $0["level"] as? String }, ["notice", "critical"])
    }

    func testTimestampsPadEveryField() {
        XCTAssertEqual(JSONLogHandlerTests.format(seconds: 0, nanoseconds: 0), "1970-01-01T00:00:00.000Z")
        XCTAssertEqual(JSONLogHandlerTests.format(seconds: 951_782_405, nanoseconds: 99_999_999), "2000-02-29T00:00:05.099Z")
        XCTAssertEqual(JSONLogHandlerTests.format(seconds: 1_704_067_199, nanoseconds: 999_999_999), "2023-12-31T23:59:59.999Z")
    }

    func testLogFormatNamesTheFlagValues() {
        XCTAssertEqual(LogFormat.allCases.map(\.rawValue), ["text", "json"])
        XCTAssertTrue(LogFormat.json.makeHandler(label: "x", level: .debug) is JSONLogHandler)
        XCTAssertEqual(LogFormat.text.makeHandler(label: "x", level: .debug).logLevel, .debug)
    }

    private static func format(seconds: Int, nanoseconds: Int) -> String? {
        let lines = NIOLockedValueBox<[String]>([])
        let handler = JSONLogHandler(
            label: "t", clock: { timespec(tv_sec: seconds, tv_nsec: nanoseconds) },
            write: { line in lines.withLockedValue { $0.append(line) } })
        Logger(label: "t") { _ in handler }.info("x")
        let line = lines.withLockedValue { $0.first } ?? ""
        return (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["time"] as? String
    }
}
