import XCTest

@testable import SIMPE2E

/// Every decoder refuses truncated and altered input with an error (never a crash), and an
/// altered message never decrypts to anything nor harms the session.
final class MalformedInputTests: XCTestCase {
    private var random = SeededRandom(seed: 21)

    /// Every prefix, and 300 single-byte changes, of `valid` through `decode`. A prefix of
    /// `shorterValidLength` is the same thing without its optional KEM part, and decodes.
    private func mangle(_ valid: [UInt8], shorterValidLength: Int? = nil, _ decode: ([UInt8]) throws -> Void) {
        for length in 0..<valid.count where length != shorterValidLength {
            XCTAssertThrowsError(try decode(Array(valid.prefix(length))), "prefix \(length)")
        }
        for _ in 0..<300 {
            var altered = valid
            altered[Int(random.next() % UInt64(valid.count))] ^= UInt8(truncatingIfNeeded: random.next() | 1)
            _ = try? decode(altered)
        }
        XCTAssertThrowsError(try decode(valid + [0]), "a trailing byte")
    }

    func testDecodersRefuseTruncatedLongAndAlteredInput() throws {
        var pair = try Pair()
        try pair.aliceStarts()
        let message = try pair.aliceSends("hello")
        _ = try pair.bobReceives(message)
        var sender = OutboundSenderKey(roomID: "ops", using: &random)
        let post = sender.encrypt(Array("post".utf8))
        let session = try RatchetSession.initiate(identity: pair.alice.identity, bundle: pair.bobBundle, using: &random)

        mangle(pair.bobBundle.encoded) { _ = try KeyBundle(encoded: $0) }
        mangle(sender.distribution.encoded.bytes) { _ = try SenderKeyDistribution(encoded: $0) }
        mangle(ResendRequest(messageId: 4242).encoded) { _ = try ResendRequest(encoded: $0) }
        mangle(session.secretBytes.bytes) { _ = try RatchetSession(secretBytes: $0) }
        mangle(pair.bob.prekeys.secretBytes.bytes) { _ = try DevicePrekeys(secretBytes: $0) }
        mangle(pair.alice.identity.secretBytes.bytes) { _ = try DeviceIdentity(secretBytes: $0) }
        mangle(try XCTUnwrap(pair.bobStore.load("peer/alice"))) { _ = try PeerSessions(secretBytes: $0) }
        try pair.bob.makeKEMPrekey(using: &random)
        let postQuantumBundle = try pair.bob.publishBundle(oneTimePrekeys: 1, using: &random)
        let withoutKEM = postQuantumBundle.encoded.count - KEMPrekey.encodedSize
        mangle(postQuantumBundle.encoded, shorterValidLength: withoutKEM) { _ = try KeyBundle(encoded: $0) }
        XCTAssertNil(try KeyBundle(encoded: Array(postQuantumBundle.encoded.prefix(withoutKEM))).kemPrekey)
        let prekeysWithKEM = pair.bob.prekeys.secretBytes.bytes
        mangle(prekeysWithKEM, shorterValidLength: prekeysWithKEM.count - KEMPrekey.encodedSize - 64) { _ = try DevicePrekeys(secretBytes: $0) }
        var postQuantumStart = try RatchetSession.initiate(identity: pair.alice.identity, bundle: postQuantumBundle, using: &random)
        let withKEM = try postQuantumStart.encrypt(Array("pq".utf8))
        for length in 0..<(withKEM.count - 16) { XCTAssertThrowsError(try PairwiseMessage(encoded: Array(withKEM.prefix(length)))) }
        mangle(postQuantumStart.secretBytes.bytes) { _ = try RatchetSession(secretBytes: $0) }
        // Messages decode with any ciphertext; what must fail is the decryption.
        for length in 0..<(post.count - 16) { XCTAssertThrowsError(try RoomMessage(encoded: Array(post.prefix(length)))) }
    }

    func testAlteredMessagesNeverDecryptAndTheSessionGoesOn() throws {
        var pair = try Pair()
        try pair.aliceStarts()
        _ = try pair.bobReceives(try pair.aliceSends("start"))
        _ = try pair.aliceReceives(try pair.bobSends("ok"))
        for round in 0..<200 {
            let valid = try pair.aliceSends("round \(round)")
            var altered = valid
            altered[Int(random.next() % UInt64(valid.count))] ^= UInt8(truncatingIfNeeded: random.next() | 1)
            XCTAssertThrowsError(try pair.bobReceives(altered), "round \(round)")
            XCTAssertThrowsError(try pair.bobReceives(Array(valid.prefix(Int(random.next() % UInt64(valid.count))))))
            XCTAssertEqual(text(try pair.bobReceives(valid)), "round \(round)")
        }
    }
}
