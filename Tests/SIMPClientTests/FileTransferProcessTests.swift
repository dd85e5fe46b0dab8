import Foundation
import SIMPClient
import SIMPCore
import SIMPTestSupport
import XCTest

/// `simp send --file` to `simp listen --downloads` as real processes through a relay on
/// loopback (docs/PROTOCOL.md §5.6).
final class FileTransferProcessTests: StoryProcessTestCase {
    func testTwentyMegabytesArriveWholeWithTheirDigest() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let server = "127.0.0.1:\(relay.port)"
        let downloads = home.appendingPathComponent("downloads-\(bob)")
        let listen = try ChildProcess(
            "simp", ["listen", "--server", server, "--user", bob, "--device", "phone", "--downloads", downloads.path],
            environment: try await environment(bob))
        children.append(listen)
        let listening = await Eventually.holds(within: .seconds(15)) { listen.standardError.contains("listening as") }
        XCTAssertTrue(listening, listen.standardError)

        var random = SplitMix64(seed: 38)
        let contents = (0..<20_000_000 / 8).flatMap { _ in withUnsafeBytes(of: random.next()) { Array($0) } }
        let original = home.appendingPathComponent("big.bin")
        XCTAssertTrue(FileManager.default.createFile(atPath: original.path, contents: Data(contents)))
        let send = try ChildProcess(
            "simp", ["send", "--server", server, "--user", alice, "--to", bob, "--file", original.path], environment: try await environment(alice))
        children.append(send)
        let status = await send.exitStatus(timeout: 300)
        XCTAssertEqual(status, 0, send.standardError)
        print("file transfer through the relay: \(send.standardOutput)") // "file big.bin delivered to bob in N s"
        let saved = await Eventually.holds(within: .seconds(10)) { listen.standardOutput.contains("file: big.bin (20000000 bytes") }
        XCTAssertTrue(saved, listen.standardOutput + listen.standardError)
        let received = FileManager.default.contents(atPath: downloads.appendingPathComponent("big.bin").path).map { Array($0) }
        XCTAssertEqual(received.map(FileDigest.of), FileDigest.of(contents))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: downloads.appendingPathComponent(".partial").path), [])
    }
}
