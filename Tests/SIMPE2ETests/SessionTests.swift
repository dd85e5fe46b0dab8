import XCTest

@testable import SIMPE2E

/// Pairwise sessions (docs/E2E.md §4-§7): start with an offline device, the ratchet in both
/// directions, duplicates, tampering, persistence, redaction.
final class SessionTests: XCTestCase {
    func testOfflineStartThenConversationInBothDirections() throws {
        var pair = try Pair()
        try pair.aliceStarts()
        let first = try pair.aliceSends("hello bob")
        XCTAssertEqual(try PairwiseMessage(encoded: first).start?.oneTimePrekeyID, pair.bobBundle.oneTimePrekeys.first!.id - 1)
        let received = try pair.bobReceives(first)
        XCTAssertEqual(text(received), "hello bob")
        XCTAssertEqual(received.event, .newSession)
        XCTAssertEqual(pair.bob.prekeys.unusedOneTimePrekeyCount, 4, "the one-time prekey is used once")
        for round in 0..<5 {
            XCTAssertEqual(text(try pair.aliceReceives(try pair.bobSends("reply \(round)"))), "reply \(round)")
            XCTAssertEqual(text(try pair.bobReceives(try pair.aliceSends("again \(round)"))), "again \(round)")
        }
    }

    func testMessagesCarryTheSessionStartUntilAReplyArrives() throws {
        var pair = try Pair()
        try pair.aliceStarts()
        let second = try {
            _ = try pair.aliceSends("one"); return try pair.aliceSends("two")
        }()
        XCTAssertNotNil(try PairwiseMessage(encoded: second).start)
        XCTAssertEqual(text(try pair.bobReceives(second)), "two", "the second message alone starts the session")
        _ = try pair.aliceReceives(try pair.bobSends("hi"))
        XCTAssertNil(try PairwiseMessage(encoded: try pair.aliceSends("three")).start)
    }

    func testADuplicateIsRecognisedAndTheSessionGoesOn() throws {
        var pair = try Pair()
        try pair.aliceStarts()
        let first = try pair.aliceSends("once")
        XCTAssertEqual(text(try pair.bobReceives(first)), "once")
        XCTAssertThrows(.duplicate, try pair.bobReceives(first))
        let reply = try pair.bobSends("reply")
        XCTAssertEqual(text(try pair.aliceReceives(reply)), "reply")
        XCTAssertThrows(.duplicate, try pair.aliceReceives(reply))
        XCTAssertThrows(.duplicate, try pair.bobReceives(first))
        XCTAssertEqual(text(try pair.bobReceives(try pair.aliceSends("still fine"))), "still fine")
    }

    func testAnAlteredMessageFailsAndLeavesTheSessionWorking() throws {
        var pair = try Pair()
        try pair.aliceStarts()
        _ = try pair.bobReceives(try pair.aliceSends("start"))
        var altered = try pair.aliceSends("pay 10")
        altered[altered.count - 20] ^= 0x01
        XCTAssertThrows(.authenticationFailed, try pair.bobReceives(altered))
        var headerChanged = try pair.aliceSends("header")
        headerChanged[headerChanged.count - "header".count - 16 - 1] ^= 0x01 // the message number's low byte
        XCTAssertThrows(.authenticationFailed, try pair.bobReceives(headerChanged))
        XCTAssertEqual(text(try pair.bobReceives(try pair.aliceSends("next"))), "next")
    }

    func testABundleWithAForgedSignedPrekeyIsRefused() throws {
        var pair = try Pair()
        var signature = pair.bobBundle.signedPrekey.signature
        signature[0] ^= 1
        let forged = KeyBundle(
            identity: pair.bobBundle.identity,
            signedPrekey: SignedPrekey(
                id: pair.bobBundle.signedPrekey.id,
                publicKey: pair.bobBundle.signedPrekey.publicKey, signature: signature),
            oneTimePrekeys: [])
        XCTAssertThrows(.badPrekeySignature, try pair.alice.startSession(with: "bob", bundle: forged, using: &pair.random))
        XCTAssertFalse(try pair.alice.hasSession(with: "bob"))
    }

    func testKeyBundleEncodingRoundTripsAndRejectsTruncation() throws {
        let pair = try Pair()
        let encoded = pair.bobBundle.encoded
        XCTAssertEqual(encoded.count, KeyBundle.fixedSize + 5 * KeyBundle.oneTimePrekeySize)
        XCTAssertEqual(try KeyBundle(encoded: encoded), pair.bobBundle)
        XCTAssertThrowsError(try KeyBundle(encoded: Array(encoded.dropLast())))
        XCTAssertThrows(.unsupportedVersion(2), try KeyBundle(encoded: [2] + encoded.dropFirst()))
    }

    func testSessionStateSurvivesSerialisationMidConversation() throws {
        var random = SeededRandom(seed: 3)
        let alice = DeviceIdentity(using: &random), bob = DeviceIdentity(using: &random)
        var bobPrekeys = DevicePrekeys(identity: bob, using: &random)
        let bundle = bobPrekeys.bundle(identity: bob, oneTimePrekeys: bobPrekeys.makeOneTimePrekeys(1, using: &random))
        var sender = try RatchetSession.initiate(identity: alice, bundle: bundle, using: &random)
        let first = try PairwiseMessage(encoded: try sender.encrypt(Array("a".utf8)))
        var receiver = try RatchetSession.respond(identity: bob, prekeys: bobPrekeys, start: first.start!)
        _ = try receiver.decrypt(first, now: 0, using: &random)
        let skippedOver = try sender.encrypt(Array("late".utf8))
        let arrives = try PairwiseMessage(encoded: try sender.encrypt(Array("b".utf8)))
        _ = try receiver.decrypt(arrives, now: 0, using: &random)

        var restored = try RatchetSession(secretBytes: receiver.secretBytes.bytes)
        XCTAssertEqual(restored.secretBytes, receiver.secretBytes)
        XCTAssertEqual(try restored.decrypt(try PairwiseMessage(encoded: skippedOver), now: 0, using: &random), Array("late".utf8))
        XCTAssertEqual(try DeviceIdentity(secretBytes: alice.secretBytes.bytes).publicKey, alice.publicKey)
        bobPrekeys = try DevicePrekeys(secretBytes: bobPrekeys.secretBytes.bytes)
        XCTAssertEqual(bobPrekeys.unusedOneTimePrekeyCount, 1)
    }

    /// The saved state keeps the sending ratchet's public key (version 2), so that encrypting
    /// does not derive it from the private key, an X25519 multiplication per message; state
    /// saved before (version 1, without it) still loads, the key derived once.
    func testSessionStateKeepsTheSendingRatchetPublicKeyAndVersionOneStillLoads() throws {
        var random = SeededRandom(seed: 5)
        let alice = DeviceIdentity(using: &random), bob = DeviceIdentity(using: &random)
        let prekeys = DevicePrekeys(identity: bob, using: &random)
        var sender = try RatchetSession.initiate(identity: alice, bundle: prekeys.bundle(identity: bob, oneTimePrekeys: []), using: &random)
        let saved = sender.secretBytes.bytes
        // version, flags, two identities (64 each), base key, root key, sending private key (32 each)
        let publicKeyAt = 1 + 1 + 64 + 64 + 32 + 32 + 32
        let first = try PairwiseMessage(encoded: try sender.encrypt(Array("one".utf8)))
        XCTAssertEqual(saved[0], 2)
        XCTAssertEqual(Array(saved[publicKeyAt..<publicKeyAt + 32]), first.header.ratchetKey, "the public key is saved")

        let versionOne = [1] + saved[1..<publicKeyAt] + saved[(publicKeyAt + 32)...]
        var restored = try RatchetSession(secretBytes: Array(versionOne))
        XCTAssertEqual(restored.secretBytes.bytes, saved, "the public key is derived from the version-1 state")
        var reloaded = try RatchetSession(secretBytes: saved)
        XCTAssertEqual(try restored.encrypt(Array("one".utf8)), try reloaded.encrypt(Array("one".utf8)))
    }

    func testDescriptionsNeverShowKeyMaterial() throws {
        var random = SeededRandom(seed: 4)
        let alice = DeviceIdentity(using: &random), bob = DeviceIdentity(using: &random)
        let prekeys = DevicePrekeys(identity: bob, using: &random)
        let session = try RatchetSession.initiate(identity: alice, bundle: prekeys.bundle(identity: bob, oneTimePrekeys: []), using: &random)
        var dumped = ""
        dump(session, to: &dumped)
        dump(alice, to: &dumped)
        dump(alice.secretBytes, to: &dumped)
        let texts = [
            String(describing: session), String(reflecting: session), String(describing: alice),
            String(describing: prekeys), String(describing: alice.secretBytes), "\(session.secretBytes)", dumped,
        ]
        let secrets = [
            Array(alice.agreementKey.rawRepresentation), Array(alice.signingKey.rawRepresentation),
            session.rootKey.bytes, session.sendingRatchetKey.privateKey.bytes, session.sendingChain!.bytes,
            Array(try prekeys.signedPrekey(id: prekeys.currentSigned.id).rawRepresentation),
        ]
        for secret in secrets {
            // Any 8 consecutive secret bytes, in hex or decimal list form, would betray it.
            for start in stride(from: 0, through: secret.count - 8, by: 8) {
                let window = Array(secret[start..<start + 8])
                for text in texts {
                    XCTAssertFalse(text.contains(hex(window)), text)
                    XCTAssertFalse(text.contains(window.map(String.init).joined(separator: ", ")), text)
                }
            }
        }
    }
}
