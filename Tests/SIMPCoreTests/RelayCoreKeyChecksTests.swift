import NIOCore
import SIMPCore
import SIMPCoreTestKit
import XCTest

/// What the relay checks of keys at the door (docs/E2E.md §3.3, docs/PROTOCOL.md §4.8): a
/// bundle with a key of small order or a bad signature is refused with BAD_KEY_BUNDLE and never
/// stored, and a key-fetch answer never outgrows a frame.
final class RelayCoreKeyChecksTests: XCTestCase {
    private let alice = ConnectionID(1)

    private func publish(_ bundle: [UInt8], prekeys: [[UInt8]] = []) -> SIMPMessage {
        var publish = SIMPMessage(kind: .keysPublish, messageId: 6)
        publish.keyBundles = [bundle]
        publish.oneTimePrekeys = prekeys
        return publish
    }

    func testABundleWithALowOrderKeyOrABadSignatureIsRefusedAndNotStored() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        let good = SignedBundles.published(seed: 3)
        var lowOrderPrekey = good
        lowOrderPrekey.replaceSubrange(69..<101, with: [UInt8](repeating: 0, count: 32)) // the signed prekey: the point 0
        var badSignature = good
        badSignature[120] ^= 1
        let filler = [1] + [UInt8](repeating: 7, count: 164) + [0, 0]
        let zeroPrekey = [0, 0, 0, 5] + [UInt8](repeating: 0, count: 32)
        let cases: [(SIMPMessage, String)] = [
            (publish(lowOrderPrekey), "key bundle refused: invalid public key: signed prekey (low order) (docs/E2E.md §3.3)"),
            (publish(badSignature), "key bundle refused: the signed prekey's signature does not verify with the identity key (docs/E2E.md §3.3)"),
            (publish(filler), "key bundle refused: the signed prekey's signature does not verify with the identity key (docs/E2E.md §3.3)"),
            (
                publish(good, prekeys: [SignedBundles.prekey(4), zeroPrekey]),
                "key bundle refused: invalid public key: one-time prekey 5 (low order) (docs/E2E.md §3.3)"
            ),
        ]
        for (frame, text) in cases {
            let actions = relay.control(frame, on: alice)
            XCTAssertFalse(actions.contains { if case .store = $0 { true } else { false } }, text)
            XCTAssertTrue(actions.contains(.send(alice, .error(.badKeyBundle, text, messageId: 6))), "\(actions)")
            XCTAssertTrue(actions.contains { if case .reject(.badKeyBundle, _) = $0 { true } else { false } }, "\(actions)")
        }
        XCTAssertTrue(
            relay.control(publish(good, prekeys: [SignedBundles.prekey(4)]), on: alice).contains { if case .store = $0 { true } else { false } })
    }

    /// 20 devices with 4 KB bundles would make an 88 KB answer, above the 64 KiB frame limit: the
    /// answer lists the devices that fit and says how many were left out.
    func testAKeyFetchAnswerStaysWithinAFrame() throws {
        var relay = DevRelay()
        try relay.connect("alice", on: alice, port: 5001)
        let fetch = KeysFetch(user: "bob", skipClaimFor: [], connection: alice, messageId: 5, asker: "alice")
        let devices = (0..<20).map {
            DeviceKeys(device: "device-\($0)", bundle: [UInt8](repeating: 1, count: 4400), oneTimePrekey: SignedBundles.prekey(UInt32($0)))
        }
        let actions = relay.answer(.fetchKeys(fetch, devices, known: true))
        guard case .send(alice, let answer)? = actions.first(where: { if case .send = $0 { true } else { false } }) else {
            return XCTFail("\(actions)")
        }
        XCTAssertEqual(answer.members.count, 13)
        XCTAssertEqual(answer.devicesLeftOut, 7)
        XCTAssertEqual(answer.keyBundles.count, answer.members.count)
        XCTAssertLessThanOrEqual(MessageCodec.encode(answer).readableBytes, Framing.defaultMaxFrameSize)
        let decoded = try MessageCodec.decode(MessageCodec.encode(answer))
        XCTAssertEqual(decoded.devicesLeftOut, 7, "field 90 travels")
    }
}
