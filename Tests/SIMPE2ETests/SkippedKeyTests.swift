import SIMPE2E
import XCTest

/// Bounds on skipped message keys (docs/E2E.md §5.3): per chain, in total, and in age.
final class SkippedKeyTests: XCTestCase {
    private func establishedPair() throws -> Pair {
        var pair = try Pair()
        try pair.aliceStarts()
        _ = try pair.bobReceives(try pair.aliceSends("start"))
        _ = try pair.aliceReceives(try pair.bobSends("ok"))
        return pair
    }

    func testAGapBeyondThePerChainLimitIsRefusedAndTheSessionGoesOn() throws {
        var pair = try establishedPair()
        let limit = Int(E2ELimits.standard.maxSkipPerChain)
        var sent: [[UInt8]] = []
        for index in 0...limit + 1 { sent.append(try pair.aliceSends("m\(index)")) }
        XCTAssertThrows(.tooManySkipped(requested: UInt32(limit + 1), limit: UInt32(limit)), try pair.bobReceives(sent[limit + 1]))
        XCTAssertEqual(text(try pair.bobReceives(sent[limit])), "m\(limit)", "a gap of exactly the limit is fine")
        XCTAssertEqual(text(try pair.bobReceives(sent[limit + 1])), "m\(limit + 1)")
        XCTAssertEqual(text(try pair.bobReceives(sent[limit - 3])), "m\(limit - 3)", "skipped keys serve late messages")
    }

    /// A sender that gave up on 3,000 messages during an outage (a 75 s blackout at 50 msg/s)
    /// is still read afterwards: the gap is skipped, and of its keys only the newest
    /// `maxSkippedKeys` are kept. Failed before (the per-chain bound was 1,000: every later
    /// message was undecryptable, `blackout-75s` in sim).
    func testAGapOfMessagesTheSenderGaveUpOnIsSkippedKeepingOnlyTheNewestKeys() throws {
        var pair = try establishedPair()
        var sent: [[UInt8]] = []
        for index in 0..<3_001 { sent.append(try pair.aliceSends("m\(index)")) }
        XCTAssertEqual(text(try pair.bobReceives(sent[3_000])), "m3000")
        let kept = E2ELimits.standard.maxSkippedKeys
        XCTAssertEqual(text(try pair.bobReceives(sent[3_000 - kept])), "m\(3_000 - kept)", "the newest skipped keys are kept")
        // Older ones are not: a late copy of one reads as a duplicate.
        XCTAssertThrows(.duplicate, try pair.bobReceives(sent[3_000 - kept - 1]))
    }

    func testSkippedKeysAreForgottenAfterTheirLifetime() throws {
        var pair = try establishedPair()
        let late = try pair.aliceSends("late")
        let early = try pair.aliceSends("early")
        let lifetime = E2ELimits.standard.skippedKeyLifetimeMilliseconds
        XCTAssertEqual(text(try pair.bobReceives(early, now: 1_000)), "early")
        XCTAssertThrows(.duplicate, try pair.bobReceives(late, now: 1_000 + lifetime + 1))
        XCTAssertEqual(text(try pair.bobReceives(try pair.aliceSends("later"), now: 1_000 + lifetime + 2)), "later")
    }

    func testASkippedKeyWithinItsLifetimeStillDecrypts() throws {
        var pair = try establishedPair()
        let late = try pair.aliceSends("late")
        _ = try pair.bobReceives(try pair.aliceSends("early"), now: 1_000)
        XCTAssertEqual(text(try pair.bobReceives(late, now: 1_000 + E2ELimits.standard.skippedKeyLifetimeMilliseconds)), "late")
    }

    func testTheTotalCapDropsTheOldestSkippedKeys() throws {
        var pair = try establishedPair()
        var limits = E2ELimits()
        limits.maxSkippedKeys = 3
        let sent = try (0..<6).map { try pair.aliceSends("m\($0)") }
        _ = try pair.bob.decrypt(sent[5], from: "alice", now: 0, limits: limits, using: &pair.random)
        XCTAssertThrows(.duplicate, try pair.bob.decrypt(sent[1], from: "alice", now: 0, limits: limits, using: &pair.random))
        XCTAssertEqual(
            try pair.bob.decrypt(sent[2], from: "alice", now: 0, limits: limits, using: &pair.random).plaintext,
            Array("m2".utf8))
    }
}
