import Foundation
import SIMPE2E
import SIMPFuzz
import XCTest

/// The fuzz targets' committed inputs: the seed corpus is current, and every seed and every
/// finding in `fuzz/regressions/` passes the targets' checks (a fixed finding stays fixed).
final class FuzzInputTests: XCTestCase {
    static let fuzz = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("fuzz")

    /// The targets by folder name, with their per-input function.
    static let targets: [(name: String, entry: @Sendable (UnsafeRawBufferPointer) throws -> Void, seeds: [String: [UInt8]])] = [
        ("datagram", FuzzEntry.datagram, SeedCorpus.datagrams),
        ("control", FuzzEntry.control, SeedCorpus.controlStreams),
        ("e2e", FuzzEntry.endToEnd, SeedCorpus.endToEnd),
    ]

    /// Fails if `fuzz/corpus` differs from `SeedCorpus`; with SIMP_UPDATE_FUZZ_SEEDS=1 in
    /// the environment (`scripts/fuzz seeds`), rewrites it instead.
    func testCommittedSeedCorpusIsCurrent() throws {
        let update = ProcessInfo.processInfo.environment["SIMP_UPDATE_FUZZ_SEEDS"] == "1"
        for target in Self.targets {
            let folder = Self.fuzz.appendingPathComponent("corpus/\(target.name)")
            if update {
                try? FileManager.default.removeItem(at: folder)
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
                for (name, bytes) in target.seeds {
                    try Data(bytes).write(to: folder.appendingPathComponent(name))
                }
            }
            let committed = try Self.files(in: folder)
            XCTAssertEqual(
                committed.mapValues { $0.count }, target.seeds.mapValues { $0.count },
                "fuzz/corpus/\(target.name) is stale: run scripts/fuzz seeds and commit the result")
            for (name, bytes) in target.seeds where committed[name] != bytes {
                XCTFail("fuzz/corpus/\(target.name)/\(name) is stale: run scripts/fuzz seeds")
            }
        }
    }

    func testSeedsAndRegressionsPassTheTargets() throws {
        var inputs = 0
        for target in Self.targets {
            for folder in ["corpus", "regressions"] {
                for (name, bytes) in try Self.files(in: Self.fuzz.appendingPathComponent("\(folder)/\(target.name)")) {
                    XCTAssertNoThrow(try bytes.withUnsafeBytes(target.entry), "fuzz/\(folder)/\(target.name)/\(name)")
                    inputs += 1
                }
            }
        }
        XCTAssertGreaterThan(inputs, 40)
    }

    /// The end-to-end seeds reach past the decoders: the valid ones decode (so the target's
    /// round-trip check runs on them), the cut ones do not.
    func testTheEndToEndSeedsDecodeWhereValid() throws {
        let seeds = SeedCorpus.endToEnd
        let envelope = try E2EEnvelope(encoded: Array(seeds["envelope"]!.dropFirst()))
        XCTAssertEqual(envelope.copies.map(\.device), ["phone"])
        XCTAssertNoThrow(try PairwiseMessage(encoded: envelope.copies[0].payload))
        XCTAssertNoThrow(try E2EEnvelope(encoded: Array(seeds["envelope-empty"]!.dropFirst())))
        let bundle = try KeyBundle(encoded: Array(seeds["key-bundle"]!.dropFirst()))
        XCTAssertThrowsError(try bundle.verify(), "an unsigned prekey")
        XCTAssertThrowsError(try KeyBundle(encoded: Array(seeds["key-bundle-truncated"]!.dropFirst())))
        XCTAssertNoThrow(try OneTimePrekey(encoded: Array(seeds["one-time-prekey"]!.dropFirst())))
        XCTAssertNoThrow(try PairwiseMessage(encoded: Array(seeds["pairwise-ratchet"]!.dropFirst())))
        let list = try SignedDeviceList(encoded: Array(seeds["device-list"]!.dropFirst()))
        XCTAssertEqual(list.devices.map(\.device), ["desk", "phone"])
        XCTAssertThrowsError(try SignedDeviceList(encoded: Array(seeds["device-list-forged"]!.dropFirst())), "a bad signature")
        XCTAssertEqual(try RoomAdmit(encoded: Array(seeds["room-admit"]!.dropFirst())), RoomAdmit(roomID: "lobby", user: "carol"))
    }

    /// The regular files of `folder` by name (none if it does not exist).
    static func files(in folder: URL) throws -> [String: [UInt8]] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        var files: [String: [UInt8]] = [:]
        for name in names where !name.hasPrefix(".") {
            files[name] = [UInt8](try Data(contentsOf: folder.appendingPathComponent(name)))
        }
        return files
    }
}
