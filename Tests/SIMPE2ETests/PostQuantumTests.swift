import SIMPE2E
import XCTest

/// Session starts with a signed ML-KEM-768 prekey (docs/E2E.md §4.1).
final class PostQuantumTests: XCTestCase {
    private func pairOfferingKEM() throws -> Pair {
        var pair = try Pair()
        try pair.bob.makeKEMPrekey(using: &pair.random)
        pair.bobBundle = try pair.bob.publishBundle(oneTimePrekeys: 2, using: &pair.random)
        return pair
    }

    func testASessionStartedWithTheKEMPrekeyWorksBothWays() throws {
        var pair = try pairOfferingKEM()
        XCTAssertEqual(pair.bobBundle.encoded.count, KeyBundle.fixedSize + 2 * KeyBundle.oneTimePrekeySize + KEMPrekey.encodedSize)
        XCTAssertEqual(try KeyBundle(encoded: pair.bobBundle.encoded), pair.bobBundle)
        try pair.aliceStarts()
        let first = try pair.aliceSends("post-quantum hello")
        XCTAssertEqual(try PairwiseMessage(encoded: first).start?.kem?.ciphertext.count, KEMPrekey.ciphertextSize)
        XCTAssertEqual(text(try pair.bobReceives(first)), "post-quantum hello")
        for round in 0..<3 {
            XCTAssertEqual(text(try pair.aliceReceives(try pair.bobSends("r\(round)"))), "r\(round)")
            XCTAssertEqual(text(try pair.bobReceives(try pair.aliceSends("a\(round)"))), "a\(round)")
        }
    }

    func testAnAlteredKEMCiphertextFails() throws {
        var pair = try pairOfferingKEM()
        try pair.aliceStarts()
        var first = try pair.aliceSends("hello")
        first[3 + 64 + 32 + 4 + 4 + 4 + 100] ^= 0x01 // inside the KEM ciphertext
        XCTAssertThrowsError(try pair.bobReceives(first))
        XCTAssertFalse(try pair.bob.hasSession(with: "alice"))
    }

    func testAForgedKEMPrekeyIsRefused() throws {
        let pair = try pairOfferingKEM()
        let kem = try XCTUnwrap(pair.bobBundle.kemPrekey)
        var signature = kem.signature
        signature[5] ^= 0x01
        let forged = KeyBundle(
            identity: pair.bobBundle.identity, signedPrekey: pair.bobBundle.signedPrekey, oneTimePrekeys: [],
            kemPrekey: KEMPrekey(id: kem.id, publicKey: kem.publicKey, signature: signature))
        XCTAssertThrows(.badPrekeySignature, try forged.verify())
    }
}
