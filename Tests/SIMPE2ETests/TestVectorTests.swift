import Crypto
import Foundation
import XCTest

@testable import SIMPE2E

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
        XCTAssertEqual(
            hex(alice.publicKey.encoded),
            "d89e3bad79437dbed9f843418304f460ff05c7fe81fe4a9577a804cb9367ff668bb04e1c1b83dddf311f5bcddf7c50ed" + "e3c0802f47ec796e2a131cf41298d9f3")
        XCTAssertEqual(
            hex(bob.publicKey.encoded),
            "392d174a38b3b1beafaf1fe824870841c5fa531bc6eafdb6402c124664488c1c1ce56a48c82ff99162a14bc544612674" + "e5d61fb9317e65d4055780fdbcb4dc35")
        let bundle = bobPrekeys().1
        try bundle.verify()
        let expected = bytes(
            hex:
                "01392d174a38b3b1beafaf1fe824870841c5fa531bc6eafdb6402c124664488c1c1ce56a48c82ff99162a14bc5446126"
                + "74e5d61fb9317e65d4055780fdbcb4dc35000000019fd7ad6dcff4298dd3f96d5b1b2af910a0535b1488d7f8fabb349a"
                + "982880b615a1b349a4c5b7beea3f941593f49d577c7269a6f7a719cc7a334d6613cc42077168c694232fc98fa6066351"
                + "0b36394b04674646b6e73854fa8f9934b55101210d0001000000023f3e5f6d86926c9c128cf84581574f96840d98ee5a" + "b53b1ec3b76e2bb25b945e")
        try KeyBundle(encoded: expected).verify()
        #if os(Linux) // RFC 8032 signatures, as BoringSSL makes them; CryptoKit randomises its own
        XCTAssertEqual(hex(bundle.encoded), hex(expected))
        #endif
    }

    func testSessionStartRatchetAndBothMessages() throws {
        let (prekeys, bundle) = bobPrekeys()
        var aliceRandom = ScriptedRandom(script: Self.key(0xD0) + Self.key(0xE0))
        var aliceSession = try RatchetSession.initiate(identity: alice, bundle: bundle, using: &aliceRandom)
        XCTAssertEqual(hex(aliceSession.rootKey.bytes), "32576a9e8c2bf409851033414d750aa302e106b5642aa3e6844d5a5451aa4205")
        XCTAssertEqual(hex(aliceSession.sendingChain!.bytes), "e59dda7eda8bebd637619cd5c30ef3d191442373f8ee5140d63c295b516e5482")
        XCTAssertEqual(
            hex(E2EKDF.chainStep(aliceSession.sendingChain!.bytes).messageKey), "ee9f33669e55db3e644ee7ebb66b686bff5cb973bee0c66d494a8a38c820afe5")
        let first = try aliceSession.encrypt(Array("the eagle lands at midnight".utf8))
        XCTAssertEqual(
            hex(first),
            "010101d89e3bad79437dbed9f843418304f460ff05c7fe81fe4a9577a804cb9367ff668bb04e1c1b83dddf311f5bcddf"
                + "7c50ede3c0802f47ec796e2a131cf41298d9f36b3ee67463583cbe3dc08fe9d0765c2666ff5210dd527c9d8705e44927"
                + "c80d550000000100000002736845d54e87de09d6bb114aa7042c50a4a015bd9901d1a0026f5956533a15190000000000"
                + "000000158919e8a76177953e026fd6ea1bd15b796e3771150da4609d242864441d4a98ef8122877cebc11abc9d2d")

        let start = try XCTUnwrap(try PairwiseMessage(encoded: first).start)
        var bobSession = try RatchetSession.respond(identity: bob, prekeys: prekeys, start: start)
        XCTAssertEqual(hex(bobSession.rootKey.bytes), "7d1dbcedf78bd4c1ec874d318101dca48c71b90b84f1dc751df53c1219d350b4")
        var bobRandom = ScriptedRandom(script: Self.key(0xF0))
        XCTAssertEqual(
            try bobSession.decrypt(try PairwiseMessage(encoded: first), now: 0, using: &bobRandom),
            Array("the eagle lands at midnight".utf8))
        let reply = try bobSession.encrypt(Array("roger".utf8))
        XCTAssertEqual(
            hex(reply),
            "01023e73ce162827a32ff92378fcf4f36464d8cf0a8113638690a775f2b699abd66e0000000000000000cd45cc65c707" + "1e7e1135484e69a8cab9f82678f4b3")
        var noRandom = ScriptedRandom(script: Self.key(0x00))
        XCTAssertEqual(try aliceSession.decrypt(try PairwiseMessage(encoded: reply), now: 0, using: &noRandom), Array("roger".utf8))
    }

    /// §4.1: the vector's ML-KEM ciphertext to Bob's KEM prekey (made once; encapsulation is random).
    static let kemCiphertext = bytes(
        hex:
            "cdaf1fae69d521eff340058e4ceb33f09b7f2063fe3224dfb812004b3058b175b52215f796122ae7f12320595deeae81"
            + "6789c6606d2e88d872fbce5361bf5c11ddf19f869ef9ee68b909116f4e6315032f10832205a6cc6e5311e07374d5f0b7"
            + "2aa32fef4412a08be830c90dacf762655aca49800417b9b01749fbd3d2159aaae2535ecd36c7e2a6afd989dd35c77f1b"
            + "69f1d814f6987f1ee756406ce5cb8da7ff6e65d86881cc4848db7a68073272bd59eb4db34e9f3b8413b488e0704bcbb4"
            + "617dd5eecb1448c8c70aadae89047db77ed4db8eb3c5708a97238523aeac325692b59aece24cb56f7084898b7dd3375d"
            + "d8cb2841ad3ff1fce6efb60470167096391f8d9c42e61532697b1c2a46a396f52e0cc08bccdc99859351b429917f7311"
            + "2786b0c8295a4517e901d80f7cffc3383165e42ee15266b5cfa1133920734a6cf858956e8d4248b0c0ae699c2af7e42a"
            + "af794b475714c84cb5b51c66800c25f9df77d8582dcecebed4fda244f01b241d696fc2767e9dba2f49a7c2aeac090859"
            + "76faa312aa1063b80792689402fa237adf4cab3be655c53f037e1dd715ed0003cd263282ab17d4fb76bd50aee0c636bf"
            + "f799e9465089843243911532918d477bb15213efbe064a8f392d79a91915ef02b5364945d8f02bc15a7919a5e3a2eb6c"
            + "6748dff607ab071e3b0751198382ba59217f5ca87a8e3e910751f1d9fcdb11984ed932b62a00352eea4753d2c1840288"
            + "e2c5ca67e23bad4e51d026def8edb30b1b573348a50509ffb7792f7a81545b26cd9a3d38f145711c5fbae88b11e01b59"
            + "8a6183ea59e1ab84287aeb0b73236f1b0802833d640b783f13b892709fda4f6beab000b2594e68e99accde10a73c50cb"
            + "f2b70921b99d009e3a97efe1e8cd1487be09b1e8b03415055d73657d0f456ff8430d9aea1032e66b3e0c7fb3eb585247"
            + "dbb5212c4ad78bc056b1b2dc2a9b62e6665390d220f984976a65be381d3ecd1f41bdb1e8fd202e926cc809c86592e917"
            + "11decbef7c374538de2638968a963dea3f9bf1b760cefcfc90dd53386fb72a219dcf405ddd1a4faaabebacc631acc6db"
            + "aad588fdc4fe88613a38d0f90a8da32b654323894aa36f1496ad9b05a7db84dd97dcd23fefe87190a3985521b6f67b17"
            + "4a5eae0acbca717be97444dc7fc79a3c1e316fa19e7970220e073391b7bbe96cbede65c4f20d5909483682d894c115d0"
            + "10c8008f74f2397c9c3e5b1d97fbf80d3a4507f5921d7cdcec2ef66d5196ba494d26f4cf6167bfa51016bb1aa9f8b9dd"
            + "0bb453ca774c505497f51549df1dd6f178a3c6df8d0681e9aedccfd305307c835a34661b126018f16f237899d60d3cf3"
            + "ea6bd00a7af10d3d6201ea1527ca99b79ff9b9fc86e9aa61a55e08092cdf23197ad71f91d556f4abf18607653575fbef"
            + "95d265f5127b8902cc69e4bffa0462669d8051647e4a97ffe771085b76f65e53d6491561a84e33ad1ba827ac08aa469f"
            + "7052d88250137d30c5ceab33e633d3cb48b74e112ec11380b11d63561d380daa")

    func testPostQuantumSessionStartDecapsulatesTheFixedCiphertext() throws {
        var random = ScriptedRandom(script: Self.key(0x90) + Self.key(0xB0) + Self.key(0x60) + Self.key(0x80))
        var prekeys = DevicePrekeys(identity: bob, using: &random)
        let oneTime = prekeys.makeOneTimePrekeys(1, using: &random)
        prekeys.makeKEMPrekey(identity: bob, using: &random)
        let bundle = prekeys.bundle(identity: bob, oneTimePrekeys: oneTime)
        try bundle.verify()
        XCTAssertEqual(hex(Array(SHA256.hash(data: Self.kemCiphertext))), "63cfb5d1c186591260cb78416fe2aac244e288eb08dbf52f8535a1eae258468b")
        #if os(Linux) // RFC 8032 signatures, as above
        XCTAssertEqual(hex(Array(SHA256.hash(data: bundle.encoded))), "8e72e11c7bb1af13935948e291c7af4f1289bc884b1fcd77d997fdbbcc2f2db1")
        #endif
        let start = SessionStartFields(
            initiator: alice.publicKey,
            baseKey: Array(try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: Self.key(0xD0)).publicKey.rawRepresentation),
            signedPrekeyID: 1, oneTimePrekeyID: 2, kem: KEMEncapsulation(prekeyID: 3, ciphertext: Self.kemCiphertext), isRecovery: false)
        XCTAssertEqual(hex(try prekeys.kemSharedSecret(start.kem!)), "531dc51d40b0a370259f054256843d5a46a83527878514d45cd7cd789b39e8d0")
        XCTAssertEqual(
            hex(try RatchetSession.respond(identity: bob, prekeys: prekeys, start: start).rootKey.bytes),
            "f051e66c92d3dbd5e5c23d05895a1937d8f309e684403720eee60d28a71f31e0")
    }

    func testRoomPostWithASenderKey() throws {
        var random = ScriptedRandom(script: [0x04, 0x03, 0x02, 0x01, 0, 0, 0, 0] + Self.key(0x20) + Self.key(0x40))
        var sender = OutboundSenderKey(roomID: "ops", using: &random)
        XCTAssertEqual(
            hex(sender.distribution.encoded.bytes),
            "010400036f70730102030400000000202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f25"
                + "43b92ff1095511476adc8369db6ddc933665a11978dda1404ee1066ca9559d")
        let post = sender.encrypt(Array("vault code 4417".utf8))
        #if os(Linux) // the Ed25519 signature, as above
        XCTAssertEqual(
            hex(post),
            "010301020304000000000cc3185fe851ceb0c99518c68e6ce95c4f65be085f10a1dce0b4cf9b2f165815587d6ea867fe"
                + "07706fc000662bf52106643627b6b459cd064b68da6000a255eaf1aab0b38adb1aed5733e647dc65cf8cd2d8d859d087" + "1593f2299fa1236e09")
        #endif
        var receiver = InboundSenderKey(
            try SenderKeyDistribution(
                encoded: bytes(
                    hex:
                        "010400036f70730102030400000000202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f25"
                        + "43b92ff1095511476adc8369db6ddc933665a11978dda1404ee1066ca9559d")))
        XCTAssertEqual(
            try receiver.decrypt(
                try RoomMessage(
                    encoded: bytes(
                        hex:
                            "010301020304000000000cc3185fe851ceb0c99518c68e6ce95c4f65be085f10a1dce0b4cf9b2f165815587d6ea867fe"
                            + "07706fc000662bf52106643627b6b459cd064b68da6000a255eaf1aab0b38adb1aed5733e647dc65cf8cd2d8d859d087"
                            + "1593f2299fa1236e09")), now: 0),
            Array("vault code 4417".utf8))
    }

    func testSafetyNumber() {
        XCTAssertEqual(
            SafetyNumber.compute(
                localUser: "bob", localIdentity: bob.publicKey,
                remoteUser: "alice", remoteIdentity: alice.publicKey),
            "64302 81187 60743 00921 10560 32124 70575 25727 90166 17946 43091 04415")
    }

    // MARK: The document's vectors

    /// docs/E2E.md §11 states exactly the vectors computed here, so a reader can check an
    /// implementation from the document alone (the KEM ciphertext included).
    func testTheDocumentStatesTheVectorsThisCodeComputes() throws {
        let (documented, safetyNumber) = try Self.documentedVectors()
        let computed = try computedVectors()
        XCTAssertEqual(Set(documented.keys), Set(computed.keys), "labels in docs/E2E.md §11")
        for (label, value) in computed { XCTAssertEqual(documented[label], value, label) }
        XCTAssertEqual(
            safetyNumber,
            SafetyNumber.compute(localUser: "bob", localIdentity: bob.publicKey, remoteUser: "alice", remoteIdentity: alice.publicKey))
    }

    /// The §11 values as this code makes them, by the document's labels, in hex.
    private func computedVectors() throws -> [String: String] {
        let (prekeys, bundle) = bobPrekeys()
        var aliceRandom = ScriptedRandom(script: Self.key(0xD0) + Self.key(0xE0))
        var aliceSession = try RatchetSession.initiate(identity: alice, bundle: bundle, using: &aliceRandom)
        var values = [
            "IK_A": hex(alice.publicKey.encoded), "IK_B": hex(bob.publicKey.encoded), "Bob's bundle": hex(bundle.encoded),
            "root key after Alice's first step": hex(aliceSession.rootKey.bytes),
            "Alice's first sending chain key": hex(aliceSession.sendingChain!.bytes),
            "message key of message 1": hex(E2EKDF.chainStep(aliceSession.sendingChain!.bytes).messageKey),
        ]
        let first = try aliceSession.encrypt(Array("the eagle lands at midnight".utf8))
        var bobSession = try RatchetSession.respond(
            identity: bob, prekeys: prekeys, start: try XCTUnwrap(try PairwiseMessage(encoded: first).start))
        values["SK"] = hex(bobSession.rootKey.bytes)
        var bobRandom = ScriptedRandom(script: Self.key(0xF0))
        _ = try bobSession.decrypt(try PairwiseMessage(encoded: first), now: 0, using: &bobRandom)
        values["Message 1"] = hex(first)
        values["Message 2"] = hex(try bobSession.encrypt(Array("roger".utf8)))

        var random = ScriptedRandom(script: [0x04, 0x03, 0x02, 0x01, 0, 0, 0, 0] + Self.key(0x20) + Self.key(0x40))
        var sender = OutboundSenderKey(roomID: "ops", using: &random)
        values["Sender key distribution"] = hex(sender.distribution.encoded.bytes)
        values["Room post"] = hex(sender.encrypt(Array("vault code 4417".utf8)))

        var kemRandom = ScriptedRandom(script: Self.key(0x90) + Self.key(0xB0) + Self.key(0x60) + Self.key(0x80))
        var kemPrekeys = DevicePrekeys(identity: bob, using: &kemRandom)
        let oneTime = kemPrekeys.makeOneTimePrekeys(1, using: &kemRandom)
        kemPrekeys.makeKEMPrekey(identity: bob, using: &kemRandom)
        let kemBundle = kemPrekeys.bundle(identity: bob, oneTimePrekeys: oneTime)
        let start = SessionStartFields(
            initiator: alice.publicKey,
            baseKey: Array(try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: Self.key(0xD0)).publicKey.rawRepresentation),
            signedPrekeyID: 1, oneTimePrekeyID: 2, kem: KEMEncapsulation(prekeyID: 3, ciphertext: Self.kemCiphertext), isRecovery: false)
        values["KEM ciphertext `CT`"] = hex(Self.kemCiphertext)
        values["SHA-256(CT)"] = hex(Array(SHA256.hash(data: Self.kemCiphertext)))
        values["SS = Decaps(CT)"] = hex(try kemPrekeys.kemSharedSecret(start.kem!))
        values["SK with SS"] = hex(try RatchetSession.respond(identity: bob, prekeys: kemPrekeys, start: start).rootKey.bytes)
        let size = String(kemBundle.encoded.count) // "1,455" as the document writes it
        values["SHA-256(Bob's bundle with the KEM prekey, \(size.dropLast(3)),\(size.suffix(3)) bytes)"] = hex(
            Array(SHA256.hash(data: kemBundle.encoded)))
        return values
    }

    /// The hex values docs/E2E.md §11 states, by label, and its safety number. A value is a
    /// `label  hex` line in a code block, a label line followed by an indented hex line, or a
    /// whole code block after a line `Label (N bytes…):`, whose N is checked.
    static func documentedVectors() throws -> (values: [String: String], safetyNumber: String) {
        let text = try documentText("docs/E2E.md")
        let section = try XCTUnwrap(text.components(separatedBy: "## 11. Test vectors").dropFirst().first?.components(separatedBy: "\n## ").first)
        var values: [String: String] = [:]
        var blockLabel: (name: String, bytes: Int)?
        var pendingLabel: String?
        var inBlock = false
        let isHex = { (text: Substring) in !text.isEmpty && text.allSatisfy { $0.isHexDigit && !$0.isUppercase } }
        for line in section.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if line.hasPrefix("```") {
                if inBlock, let blockLabel {
                    XCTAssertEqual((values[blockLabel.name]?.count ?? 0) / 2, blockLabel.bytes, "size of \(blockLabel.name)")
                }
                if inBlock { blockLabel = nil }
                inBlock.toggle()
            } else if !inBlock {
                guard trimmed.hasSuffix(":"), let open = trimmed.firstIndex(of: "(") else { continue }
                let size = trimmed[open...].prefix { $0 != " " }.dropFirst().replacingOccurrences(of: ",", with: "")
                blockLabel = (trimmed[..<open].trimmingCharacters(in: .whitespaces), Int(size) ?? -1)
            } else if let pending = pendingLabel, isHex(Substring(trimmed)) {
                values[pending] = trimmed
                pendingLabel = nil
            } else if let split = trimmed.range(of: "  "), isHex(trimmed[split.upperBound...].drop { $0 == " " }) {
                values[String(trimmed[..<split.lowerBound])] = String(trimmed[split.upperBound...].drop { $0 == " " })
            } else if let blockLabel, isHex(Substring(trimmed)) {
                values[blockLabel.name, default: ""] += trimmed
            } else {
                pendingLabel = trimmed
            }
        }
        let safety = try XCTUnwrap(section.range(of: #"Safety number of .*: `[0-9 ]+`"#, options: .regularExpression))
        let number = section[safety].split(separator: "`").last!
        return (values, String(number))
    }
}
