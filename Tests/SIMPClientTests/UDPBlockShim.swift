import Foundation
import SIMPTestSupport

/// `tools/udp-block/udp-block.c`, the LD_PRELOAD shim that makes a process's network block UDP
/// while TCP passes, compiled once per test run with the system's `cc`.
enum UDPBlockShim {
    static let source = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("tools/udp-block/udp-block.c")

    private static let built = Task { () throws -> String in
        let library = FileManager.default.temporaryDirectory.appendingPathComponent("udp-block-\(UUID().uuidString).so")
        _ = try await ToolProcess.run(
            "cc", ["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", library.path, source.path, "-ldl"],
            in: FileManager.default.temporaryDirectory)
        return library.path
    }

    /// The environment that blocks the UDP of a child process: from its start, or after `afterMs`.
    static func environment(afterMs: Int? = nil) async throws -> [String: String] {
        var environment = ["LD_PRELOAD": try await built.value]
        if let afterMs { environment["SIMP_UDP_BLOCK_AFTER_MS"] = String(afterMs) }
        return environment
    }
}
