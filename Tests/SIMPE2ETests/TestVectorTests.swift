@testable import SIMPE2E
import XCTest

/// The test vectors of docs/E2E.md §11: fixed private keys and inputs, expected bytes. The
/// expected values come from tools/e2e_vectors.py, an independent implementation of the spec
/// in Python (`cryptography`), so a mismatch means the Swift code and the spec's text differ.
final class TestVectorTests: XCTestCase {
    /// Returns the scripted bytes, eight per `next()`, little-endian, as `bytes(_:)` reads them.
    struct ScriptedRandom: RandomNumberGenerator {
        var script: [UInt8]
        mutating func next() -> UInt64 {
            precondition(script.count >= 8, "the vector draws more randomness than scripted")
            defer { script.removeFirst(8) }
            return script.prefix(8).reversed().reduce(0) { $0 << 8 | UInt64($1) }
        }
    }

    /// The vectors' private keys: 32 bytes counting up from `first`, modulo 256.
    static func key(_ first: Int) -> [UInt8] { (0..<32).map { UInt8((first + $0) % 256) } }

    private let alice = try! DeviceIdentity(secretBytes: [1] + key(0x10) + key(0x30))
    private let bob = try! DeviceIdentity(secretBytes: [1] + key(0x50) + key(0x70))

    private func bobPrekeys() -> (DevicePrekeys, KeyBundle) {
        var random = ScriptedRandom(script: Self.key(0x90) + Self.key(0xB0))
        var prekeys = DevicePrekeys(identity: bob, using: &random)
        let oneTime = prekeys.makeOneTimePrekeys(1, using: &random)
        return (prekeys, prekeys.bundle(identity: bob, oneTimePrekeys: oneTime))
    }

    func testIdentitiesAndKeyBundle() throws {
        XCTAssertEqual(hex(alice.publicKey.encoded),
            "d89e3bad79437dbed9f843418304f460ff05c7fe81fe4a9577a804cb9367ff668bb04e1c1b83dddf311f5bcddf7c50ed" +
            "e3c0802f47ec796e2a131cf41298d9f3")
        XCTAssertEqual(hex(bob.publicKey.encoded),
            "392d174a38b3b1beafaf1fe824870841c5fa531bc6eafdb6402c124664488c1c1ce56a48c82ff99162a14bc544612674" +
            "e5d61fb9317e65d4055780fdbcb4dc35")
        let bundle = bobPrekeys().1
        try bundle.verify()
        let expected = bytes(hex:
            "01392d174a38b3b1beafaf1fe824870841c5fa531bc6eafdb6402c124664488c1c1ce56a48c82ff99162a14bc5446126" +
            "74e5d61fb9317e65d4055780fdbcb4dc35000000019fd7ad6dcff4298dd3f96d5b1b2af910a0535b1488d7f8fabb349a" +
            "982880b615a1b349a4c5b7beea3f941593f49d577c7269a6f7a719cc7a334d6613cc42077168c694232fc98fa6066351" +
            "0b36394b04674646b6e73854fa8f9934b55101210d0001000000023f3e5f6d86926c9c128cf84581574f96840d98ee5a" +
            "b53b1ec3b76e2bb25b945e")
        try KeyBundle(encoded: expected).verify()
        #if os(Linux)  // RFC 8032 signatures, as BoringSSL makes them; CryptoKit randomises its own
        XCTAssertEqual(hex(bundle.encoded), hex(expected))
        #endif
    }

    func testSessionStartRatchetAndBothMessages() throws {
        let (prekeys, bundle) = bobPrekeys()
        var aliceRandom = ScriptedRandom(script: Self.key(0xD0) + Self.key(0xE0))
        var aliceSession = try RatchetSession.initiate(identity: alice, bundle: bundle, using: &aliceRandom)
        XCTAssertEqual(hex(aliceSession.rootKey.bytes), "32576a9e8c2bf409851033414d750aa302e106b5642aa3e6844d5a5451aa4205")
        XCTAssertEqual(hex(aliceSession.sendingChain!.bytes), "e59dda7eda8bebd637619cd5c30ef3d191442373f8ee5140d63c295b516e5482")
        XCTAssertEqual(hex(E2EKDF.chainStep(aliceSession.sendingChain!.bytes).messageKey), "ee9f33669e55db3e644ee7ebb66b686bff5cb973bee0c66d494a8a38c820afe5")
        let first = try aliceSession.encrypt(Array("the eagle lands at midnight".utf8))
        XCTAssertEqual(hex(first),
            "010101d89e3bad79437dbed9f843418304f460ff05c7fe81fe4a9577a804cb9367ff668bb04e1c1b83dddf311f5bcddf" +
            "7c50ede3c0802f47ec796e2a131cf41298d9f36b3ee67463583cbe3dc08fe9d0765c2666ff5210dd527c9d8705e44927" +
            "c80d550000000100000002736845d54e87de09d6bb114aa7042c50a4a015bd9901d1a0026f5956533a15190000000000" +
            "000000158919e8a76177953e026fd6ea1bd15b796e3771150da4609d242864441d4a98ef8122877cebc11abc9d2d")

        let start = try XCTUnwrap(try PairwiseMessage(encoded: first).start)
        var bobSession = try RatchetSession.respond(identity: bob, prekeys: prekeys, start: start)
        XCTAssertEqual(hex(bobSession.rootKey.bytes), "7d1dbcedf78bd4c1ec874d318101dca48c71b90b84f1dc751df53c1219d350b4")
        var bobRandom = ScriptedRandom(script: Self.key(0xF0))
        XCTAssertEqual(try bobSession.decrypt(try PairwiseMessage(encoded: first), now: 0, using: &bobRandom),
                       Array("the eagle lands at midnight".utf8))
        let reply = try bobSession.encrypt(Array("roger".utf8))
        XCTAssertEqual(hex(reply),
            "01023e73ce162827a32ff92378fcf4f36464d8cf0a8113638690a775f2b699abd66e0000000000000000cd45cc65c707" +
            "1e7e1135484e69a8cab9f82678f4b3")
        var noRandom = ScriptedRandom(script: Self.key(0x00))
        XCTAssertEqual(try aliceSession.decrypt(try PairwiseMessage(encoded: reply), now: 0, using: &noRandom), Array("roger".utf8))
    }

    func testRoomPostWithASenderKey() throws {
        var random = ScriptedRandom(script: [0x04, 0x03, 0x02, 0x01, 0, 0, 0, 0] + Self.key(0x20) + Self.key(0x40))
        var sender = OutboundSenderKey(roomID: "ops", using: &random)
        XCTAssertEqual(hex(sender.distribution.encoded.bytes),
            "010400036f70730102030400000000202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f25" +
            "43b92ff1095511476adc8369db6ddc933665a11978dda1404ee1066ca9559d")
        let post = sender.encrypt(Array("vault code 4417".utf8))
        #if os(Linux)  // the Ed25519 signature, as above
        XCTAssertEqual(hex(post),
            "010301020304000000000cc3185fe851ceb0c99518c68e6ce95c4f65be085f10a1dce0b4cf9b2f165815587d6ea867fe" +
            "07706fc000662bf52106643627b6b459cd064b68da6000a255eaf1aab0b38adb1aed5733e647dc65cf8cd2d8d859d087" +
            "1593f2299fa1236e09")
        #endif
        var receiver = InboundSenderKey(try SenderKeyDistribution(encoded: bytes(hex:
            "010400036f70730102030400000000202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f25" +
            "43b92ff1095511476adc8369db6ddc933665a11978dda1404ee1066ca9559d")))
        XCTAssertEqual(try receiver.decrypt(try RoomMessage(encoded: bytes(hex:
            "010301020304000000000cc3185fe851ceb0c99518c68e6ce95c4f65be085f10a1dce0b4cf9b2f165815587d6ea867fe" +
            "07706fc000662bf52106643627b6b459cd064b68da6000a255eaf1aab0b38adb1aed5733e647dc65cf8cd2d8d859d087" +
            "1593f2299fa1236e09")), now: 0),
                       Array("vault code 4417".utf8))
    }

    func testSafetyNumber() {
        XCTAssertEqual(SafetyNumber.compute(localUser: "bob", localIdentity: bob.publicKey,
                                            remoteUser: "alice", remoteIdentity: alice.publicKey),
                       "64302 81187 60743 00921 10560 32124 70575 25727 90166 17946 43091 04415")
    }
}
