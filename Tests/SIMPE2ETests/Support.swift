import SIMPE2E
import XCTest

/// SplitMix64: a seeded generator, so the schedules and keys of a test repeat exactly.
struct SeededRandom: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Two devices, alice and bob, each with its own store, and bob's published bundle.
struct Pair {
    var random = SeededRandom(seed: 7)
    let aliceStore = MemoryStateStore(), bobStore = MemoryStateStore()
    var alice: E2EDevice
    var bob: E2EDevice
    var bobBundle: KeyBundle

    init(seed: UInt64 = 7) throws {
        random = SeededRandom(seed: seed)
        alice = try E2EDevice(store: aliceStore, using: &random)
        bob = try E2EDevice(store: bobStore, using: &random)
        bobBundle = try bob.publishBundle(oneTimePrekeys: 5, using: &random)
    }

    /// alice starts a session with bob's bundle (one one-time prekey handed out).
    mutating func aliceStarts(isRecovery: Bool = false) throws {
        let (handedOut, remaining) = bobBundle.claimingOneTimePrekey()
        bobBundle = remaining
        try alice.startSession(with: "bob", bundle: handedOut, isRecovery: isRecovery, using: &random)
    }

    mutating func aliceSends(_ text: String) throws -> [UInt8] { try alice.encrypt(Array(text.utf8), to: "bob") }
    mutating func bobSends(_ text: String) throws -> [UInt8] { try bob.encrypt(Array(text.utf8), to: "alice") }

    mutating func bobReceives(_ payload: [UInt8], now: UInt64 = 0) throws -> Decrypted {
        try bob.decrypt(payload, from: "alice", now: now, using: &random)
    }

    mutating func aliceReceives(_ payload: [UInt8], now: UInt64 = 0) throws -> Decrypted {
        try alice.decrypt(payload, from: "bob", now: now, using: &random)
    }
}

func text(_ decrypted: Decrypted) -> String { String(decoding: decrypted.plaintext, as: UTF8.self) }

func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

func bytes(hex: String) -> [UInt8] {
    var result: [UInt8] = []
    var index = hex.startIndex
    while index < hex.endIndex {
        let next = hex.index(index, offsetBy: 2)
        result.append(UInt8(hex[index..<next], radix: 16)!)
        index = next
    }
    return result
}

/// Asserts that `body` throws exactly `expected`.
func XCTAssertThrows<T>(_ expected: E2EError, _ body: @autoclosure () throws -> T, file: StaticString = #filePath, line: UInt = #line) {
    XCTAssertThrowsError(try body(), file: file, line: line) { XCTAssertEqual($0 as? E2EError, expected, file: file, line: line) }
}
