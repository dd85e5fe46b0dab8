import SIMPE2E
import XCTest

/// Sending keys reserved ahead (docs/E2E.md §15): a sender writes its session once per
/// reservation instead of once per message, and a device restarted from what it stored never
/// seals again with a key it used.
final class ReservedSendingKeysTests: XCTestCase {
    /// A store that counts the saves of each name.
    private final class CountingStore: E2EStateStore {
        let inner = MemoryStateStore()
        var saves: [String: Int] = [:]
        func load(_ name: String) throws -> [UInt8]? { inner.load(name) }
        func save(_ name: String, _ bytes: SecretBytes) throws {
            saves[name, default: 0] += 1
            inner.save(name, bytes)
        }
    }

    /// The ratchet header's message number of a payload.
    private func number(_ payload: [UInt8]) throws -> UInt32 { try PairwiseMessage(encoded: payload).header.number }

    func testAChainIsWrittenOncePerReservationAndTheReservationsGrowTo64() throws {
        var pair = try Pair()
        try pair.aliceStarts()
        let store = CountingStore()
        var random = SeededRandom(seed: 3)
        // alice's device again, on a store that counts (her identity and session copied over).
        for name in ["identity", "prekeys", "peer/bob"] { store.inner.save(name, SecretBytes(try XCTUnwrap(pair.aliceStore.load(name)))) }
        var alice = try E2EDevice(store: store, using: &random)
        for index in 0..<200 {
            let payload = try alice.encrypt(Array("m\(index)".utf8), to: "bob")
            XCTAssertEqual(text(try pair.bobReceives(payload)), "m\(index)")
        }
        // Written after messages 1, 2, 3, 6, 13, 28, 59 (reservations of 1, 2, 4, ..., 64 keys),
        // then once per 64: 122 and 185. Without reservations: 200 writes.
        XCTAssertEqual(store.saves["peer/bob"], 9)
    }

    func testARestartedDeviceNeverSealsAgainWithAKeyItUsed() throws {
        var pair = try Pair()
        try pair.aliceStarts()
        var used: Set<UInt32> = []
        for index in 0..<40 {
            let payload = try pair.aliceSends("m\(index)")
            used.insert(try number(payload))
            _ = try pair.bobReceives(payload)
        }
        // A crash: the process is gone, the store has what was written (saves are commits here).
        var random = SeededRandom(seed: 5)
        var restarted = try E2EDevice(store: pair.aliceStore, using: &random)
        let next = try restarted.encrypt(Array("after the crash".utf8), to: "bob")
        let nextNumber = try number(next)
        XCTAssertFalse(used.contains(nextNumber), "key \(nextNumber) was used before the crash")
        XCTAssertGreaterThan(nextNumber, 40, "the reserved keys not used are skipped")
        XCTAssertEqual(text(try pair.bobReceives(next)), "after the crash", "the receiver skips the keys the crash left unused")
    }

    func testKeysGivenBackAtCloseAreUsedByTheNextProcess() throws {
        var pair = try Pair()
        try pair.aliceStarts()
        for index in 0..<40 { _ = try pair.bobReceives(try pair.aliceSends("m\(index)")) }
        try pair.alice.releaseReservedKeys()
        var random = SeededRandom(seed: 5)
        var next = try E2EDevice(store: pair.aliceStore, using: &random)
        let payload = try next.encrypt(Array("next process".utf8), to: "bob")
        XCTAssertEqual(try number(payload), 40, "no key skipped after a normal close")
        XCTAssertEqual(text(try pair.bobReceives(payload)), "next process")
    }

    func testTakingTurnsWritesEverySessionAsItIs() throws {
        // Each reply starts a new sending chain: a reservation of one key, the session stored
        // as it is, so a restart skips nothing.
        var pair = try Pair()
        try pair.aliceStarts()
        for index in 0..<6 {
            _ = try pair.bobReceives(try pair.aliceSends("a\(index)"))
            _ = try pair.aliceReceives(try pair.bobSends("b\(index)"))
        }
        var random = SeededRandom(seed: 5)
        var restarted = try E2EDevice(store: pair.aliceStore, using: &random)
        XCTAssertEqual(try number(try restarted.encrypt(Array("again".utf8), to: "bob")), 0)
    }
}
