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
        let downloads = home.appendingPathComponent("downloads-\(bob)")
        let listen = try await listenForFiles(bob, into: downloads)
        let contents = try twentyMegabytes(seed: 38, into: "big.bin")
        let send = try await sendFile("big.bin", from: alice, to: bob)
        let status = await send.exitStatus(timeout: 300)
        XCTAssertEqual(status, 0, send.standardError)
        print("file transfer through the relay: \(send.standardOutput)") // "file big.bin delivered to bob in N s"
        let saved = await Eventually.holds(within: .seconds(10)) { listen.standardOutput.contains("file: big.bin (20000000 bytes") }
        XCTAssertTrue(saved, listen.standardOutput + listen.standardError)
        let received = FileManager.default.contents(atPath: downloads.appendingPathComponent("big.bin").path).map { Array($0) }
        XCTAssertEqual(received.map(FileDigest.of), FileDigest.of(contents))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: downloads.appendingPathComponent(".partial").path), [])
    }

    func testAReceiverKilledHalfwayResumesWhereItSaved() async throws {
        let alice = TestRelay.uniqueUser("alice"), bob = TestRelay.uniqueUser("bob")
        let downloads = home.appendingPathComponent("downloads-\(bob)")
        let first = try await listenForFiles(bob, into: downloads)
        let contents = try twentyMegabytes(seed: 39, into: "half.bin")
        let send = try await sendFile("half.bin", from: alice, to: bob)
        let halfway = await Eventually.holds(within: .seconds(120)) {
            send.standardError.split(separator: "\n").last.map {
                $0.hasPrefix("1") && $0.contains(".") && $0.contains(" MB of 20.0 MB") && Double($0.prefix { $0 != " " }) ?? 0 >= 10
            } ?? false
        }
        XCTAssertTrue(halfway, send.standardError)
        first.signal(SIGKILL)
        _ = await first.exitStatus(timeout: 5)
        let second = try await listenForFiles(bob, into: downloads)
        let status = await send.exitStatus(timeout: 300)
        XCTAssertEqual(status, 0, send.standardError)
        // Generous: the receiver fsyncs and hashes 20 MB before it says so (slow under load).
        // The sender's progress counts acknowledged bytes, which lag behind what arrived: the
        // first receiver may have had every chunk and saved the file before the kill.
        let saved = await Eventually.holds { (first.standardOutput + second.standardOutput).contains("file: half.bin (20000000 bytes") }
        let left = (try? FileManager.default.subpathsOfDirectory(atPath: downloads.path)) ?? []
        XCTAssertTrue(saved, second.standardOutput + second.standardError + "\ndownloads: \(left)\nsender: " + send.standardError.suffix(400))
        let received = FileManager.default.contents(atPath: downloads.appendingPathComponent("half.bin").path).map { Array($0) }
        XCTAssertEqual(received.map(FileDigest.of), FileDigest.of(contents))
        // "(sent N MB)" on the last progress line. Starting again from chunk 0 would send the
        // 10 MB sent before the kill plus the whole file again (30 MB and more); resuming sends
        // less. (Losses on a busy loopback cost retransmissions of their own, about 15 % in a
        // debug build without any kill, so the bound is not tighter.)
        let last = send.standardError.split(separator: "\n").last { $0.contains("(sent ") } ?? ""
        let sent = Double(last.split(separator: "(sent ").last?.prefix { $0 != " " } ?? "") ?? .infinity
        print("resumed transfer: \(last)")
        XCTAssertLessThan(sent, 30, String(last))
    }

    /// `simp listen` of `user`'s device "phone", saving files into `downloads`, once it listens.
    private func listenForFiles(_ user: String, into downloads: URL) async throws -> ChildProcess {
        let listen = try ChildProcess(
            "simp", ["listen", "--server", "127.0.0.1:\(relay.port)", "--user", user, "--device", "phone", "--downloads", downloads.path],
            environment: try await environment(user))
        children.append(listen)
        let listening = await Eventually.holds(within: .seconds(15)) { listen.standardError.contains("listening as") }
        XCTAssertTrue(listening, listen.standardError)
        return listen
    }

    /// 20 MB of seeded random bytes written to `name` under the test's home; returns them.
    private func twentyMegabytes(seed: UInt64, into name: String) throws -> [UInt8] {
        var random = SplitMix64(seed: seed)
        let contents = (0..<20_000_000 / 8).flatMap { _ in withUnsafeBytes(of: random.next()) { Array($0) } }
        XCTAssertTrue(FileManager.default.createFile(atPath: home.appendingPathComponent(name).path, contents: Data(contents)))
        return contents
    }

    /// `simp send --file` of `name` (under the test's home) from `sender` to `receiver`.
    private func sendFile(_ name: String, from sender: String, to receiver: String) async throws -> ChildProcess {
        let send = try ChildProcess(
            "simp",
            ["send", "--server", "127.0.0.1:\(relay.port)", "--user", sender, "--to", receiver, "--file", home.appendingPathComponent(name).path],
            environment: try await environment(sender))
        children.append(send)
        return send
    }
}
