import Foundation
import SIMPCore
import SIMPE2E
import XCTest

/// A seeded generator (SIMPCore's `Entropy.seeded`, SplitMix64), so the schedules and keys of a
/// test repeat exactly.
struct SeededRandom: RandomNumberGenerator {
    private var entropy: Entropy
    init(seed: UInt64) { entropy = .seeded(seed) }
    mutating func next() -> UInt64 { entropy.next() }
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
// swift-format-ignore: AlwaysUseLowerCamelCase
func XCTAssertThrows<T>(_ expected: E2EError, _ body: @autoclosure () throws -> T, file: StaticString = #filePath, line: UInt = #line) {
    XCTAssertThrowsError(try body(), file: file, line: line) { XCTAssertEqual($0 as? E2EError, expected, file: file, line: line) }
}

/// The text of `path` in this repository (docs checked against the code).
func documentText(_ path: String) throws -> String {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    return try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
}
