import Foundation
import Subprocess
import SystemPackage
import XCTest

/// The committed protobuf-c code must be what protoc-c generates from proto/simp.proto today.
final class GeneratedCodeTests: XCTestCase {
    func testCommittedProtobufCCodeIsCurrent() async throws {
        let root = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let script = FilePath(root.appendingPathComponent("scripts/generate-proto").path)
        let check = try await Subprocess.run(.path(script), arguments: ["--check"], output: .discarded, error: .string(limit: 1 << 20))
        XCTAssertEqual(check.terminationStatus, .exited(0), check.standardError)
    }
}
