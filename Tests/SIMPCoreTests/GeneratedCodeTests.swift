import Foundation
import XCTest

/// The committed protobuf-c code must be what protoc-c generates from proto/simp.proto today.
final class GeneratedCodeTests: XCTestCase {
    func testCommittedProtobufCCodeIsCurrent() throws {
        let root = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let check = Process()
        check.executableURL = root.appendingPathComponent("scripts/generate-proto")
        check.arguments = ["--check"]
        let errors = Pipe()
        check.standardError = errors
        check.standardOutput = FileHandle.nullDevice
        try check.run()
        check.waitUntilExit()
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(check.terminationStatus, 0, message)
    }
}
