import SIMPCore
import XCTest

@testable import SIMPE2E

/// Cross-signing (docs/E2E.md §3.4): a user's device list signed by the user key, what a sender
/// pins, and which devices it encrypts to.
final class DeviceListTests: XCTestCase {
    private var random = SeededRandom(seed: 35)

    private func identity(_ seed: UInt64) -> IdentityKey { SeededKeys.identity(seed) }

    private func key(_ seed: UInt64) -> UserSigningKey { SeededKeys.userKey(seed) }

    func testASignedListRoundTripsSortedAndItsBytesAreAsDocumented() throws {
        let (phone, laptop) = (identity(1), identity(2))
        let list = try SignedDeviceList.signed(
            user: "bob", counter: 7, devices: [ApprovedDevice(device: "phone", identity: phone), ApprovedDevice(device: "laptop", identity: laptop)],
            by: key(9))
        XCTAssertEqual(list.devices.map(\.device), ["laptop", "phone"], "sorted by name")
        XCTAssertEqual(try SignedDeviceList(encoded: list.encoded), list)
        // 0x01 ‖ user key ‖ str16("bob") ‖ u64 7 ‖ u16 2 ‖ 2 × (str16 name ‖ IK) ‖ signature.
        XCTAssertEqual(list.encoded.count, 1 + 32 + 5 + 8 + 2 + (2 + 6 + 64) + (2 + 5 + 64) + 64)
        XCTAssertEqual(list.encoded[0], 1)
        XCTAssertEqual(Array(list.encoded[1..<33]), key(9).publicKey)
        XCTAssertEqual(Array(list.encoded[33..<38]), [0, 3] + Array("bob".utf8))
        XCTAssertEqual(Array(list.encoded[38..<46]), [0, 0, 0, 0, 0, 0, 0, 7])
        // The signature is over the context string and every byte before it.
        let signed = Array(list.encoded.dropLast(64))
        let ed = try XCTUnwrap(try? IdentityKey(agreement: phone.agreement, signing: key(9).publicKey))
        XCTAssertTrue(ed.isValidSignature(list.signature, of: Array("SIMP-E2E v1 device list".utf8) + signed))
        XCTAssertFalse(ed.isValidSignature(list.signature, of: signed), "the context string is part of what is signed")
        XCTAssertTrue(list.approves(device: "phone", identity: phone))
        XCTAssertFalse(list.approves(device: "phone", identity: laptop), "a device is approved with its identity only")
    }

    func testAnAlteredOrMalformedListIsRefused() throws {
        let list = try SignedDeviceList.signed(user: "bob", counter: 1, devices: [ApprovedDevice(device: "phone", identity: identity(1))], by: key(9))
        for index in [1, 40, 50, list.encoded.count - 1] {
            var altered = list.encoded
            altered[index] ^= 0x01
            XCTAssertThrowsError(try SignedDeviceList(encoded: altered), "byte \(index)")
        }
        XCTAssertThrowsError(try SignedDeviceList(encoded: list.encoded + [0]), "trailing bytes")
        XCTAssertThrowsError(try SignedDeviceList(encoded: Array(list.encoded.dropLast())))
        XCTAssertThrowsError(try SignedDeviceList(encoded: [2] + list.encoded.dropFirst())) {
            XCTAssertEqual($0 as? E2EError, .unsupportedVersion(2))
        }
        // Two entries with one name, or out of order, cannot be signed into a valid list.
        let twice = try? SignedDeviceList.signed(
            user: "bob", counter: 1,
            devices: [ApprovedDevice(device: "a", identity: identity(1)), ApprovedDevice(device: "a", identity: identity(2))],
            by: key(9))
        XCTAssertNil(twice)
    }

    func testTheFirstListIsPinnedThenOnlyNewerListsOfThatKeyReplaceIt() throws {
        let phone = ApprovedDevice(device: "phone", identity: identity(1))
        let laptop = ApprovedDevice(device: "laptop", identity: identity(2))
        let first = try SignedDeviceList.signed(user: "bob", counter: 1, devices: [phone], by: key(9))
        let second = try first.adding(laptop, by: key(9))
        XCTAssertEqual(second.counter, 2)
        XCTAssertEqual(DeviceListPin.evaluate(served: [], for: "bob", pinned: nil), .noUserKey)
        XCTAssertEqual(DeviceListPin.evaluate(served: first.encoded, for: "bob", pinned: nil), .pinned(first))
        XCTAssertEqual(DeviceListPin.evaluate(served: second.encoded, for: "bob", pinned: first), .updated(second))
        XCTAssertEqual(DeviceListPin.evaluate(served: first.encoded, for: "bob", pinned: second), .unchanged, "an old list is not newer")
        XCTAssertEqual(DeviceListPin.evaluate(served: second.encoded, for: "bob", pinned: second), .unchanged)
        XCTAssertEqual(
            DeviceListPin.evaluate(served: first.encoded, for: "carol", pinned: nil),
            .invalid(reason: "malformed end-to-end data: a device list of bob, not of carol"))

        let other = try SignedDeviceList.signed(user: "bob", counter: 50, devices: [phone, laptop], by: key(10))
        XCTAssertEqual(DeviceListPin.evaluate(served: other.encoded, for: "bob", pinned: second), .userKeyChanged(other))
        guard case .withdrawn = DeviceListPin.evaluate(served: [], for: "bob", pinned: second) else { return XCTFail("a pinned key stays") }
        guard case .withdrawn = DeviceListPin.evaluate(served: [1, 2, 3], for: "bob", pinned: second) else {
            return XCTFail("a bad list undoes nothing")
        }
    }

    func testOnlyApprovedDevicesWithTheirIdentitiesAreRecipientsOnceAKeyIsPinned() throws {
        let devices = [
            PeerDevice(device: "ghost", identity: identity(3)), PeerDevice(device: "laptop", identity: identity(2)),
            PeerDevice(device: "phone", identity: identity(9)),
        ]
        XCTAssertEqual(DeviceListPin.split(devices, under: nil).approved, devices, "no user key: every device, as before")
        let list = try SignedDeviceList.signed(
            user: "bob", counter: 1,
            devices: [ApprovedDevice(device: "phone", identity: identity(1)), ApprovedDevice(device: "laptop", identity: identity(2))], by: key(9))
        let split = DeviceListPin.split(devices, under: list)
        XCTAssertEqual(split.approved.map(\.device), ["laptop"])
        XCTAssertEqual(split.unapproved.map(\.device), ["ghost", "phone"], "a device not listed, and one whose key is not the approved one")
    }

    /// The messenger seals only for approved devices once a list is pinned, room sender keys too.
    func testTheMessengerSealsOnlyForApprovedDevicesAndAGhostGetsNoCopy() throws {
        var alice = try E2EMessenger(device: "desk", store: MemoryStateStore(), using: &random)
        var phone = try E2EMessenger(device: "phone", store: MemoryStateStore(), using: &random)
        var ghost = try E2EMessenger(device: "ghost", store: MemoryStateStore(), using: &random)
        func bundle(_ device: inout E2EMessenger) throws -> KeyBundle {
            let prekeys = try device.publishPrekeys(1, using: &random)
            return device.local.prekeys.bundle(identity: device.local.identity, oneTimePrekeys: prekeys)
        }
        _ = try alice.updateDevices(of: "bob", bundles: [("ghost", try bundle(&ghost)), ("phone", try bundle(&phone))], using: &random)
        XCTAssertEqual(try E2EEnvelope(encoded: try alice.seal([1], to: "bob")).copies.map(\.device), ["ghost", "phone"], "no user key yet")

        let list = try SignedDeviceList.signed(
            user: "bob", counter: 1, devices: [ApprovedDevice(device: "phone", identity: phone.local.identity.publicKey)], by: key(9))
        XCTAssertEqual(try alice.takeDeviceList(list.encoded, of: "bob"), .pinned(list))
        XCTAssertEqual(try E2EEnvelope(encoded: try alice.seal([2], to: "bob")).copies.map(\.device), ["phone"])
        XCTAssertEqual(try alice.unapprovedDevices(of: "bob").map(\.device), ["ghost"])
        let post = try alice.sealRoomPost([3], room: "ops", members: ["bob"], using: &random)
        XCTAssertEqual(try post.distributions.map { try E2EEnvelope(encoded: $0.envelope).copies.map(\.device) }, [["phone"]])

        // The relay withdrawing the list does not bring the ghost back.
        guard case .withdrawn = try alice.takeDeviceList([], of: "bob") else { return XCTFail("withdrawn") }
        XCTAssertEqual(try E2EEnvelope(encoded: try alice.seal([4], to: "bob")).copies.map(\.device), ["phone"])
    }

    func testAVerificationWithAUserKeyLapsesWhenTheKeyChangesOrGoes() {
        let phone = identity(1)
        let verified = VerifiedIdentities([("phone", phone)], userKey: key(9).publicKey)
        XCTAssertEqual(VerifiedIdentities(encoded: verified.encoded), verified, "the user key is kept with the devices")
        XCTAssertEqual(verified.check([("phone", phone)], userKey: key(9).publicKey), .verified)
        XCTAssertEqual(verified.check([("phone", phone)], userKey: key(10).publicKey), .changed(devices: ["user key"]))
        XCTAssertEqual(verified.check([("phone", phone)], userKey: nil), .changed(devices: ["user key"]))
        XCTAssertEqual(VerifiedIdentities([("phone", phone)]).check([("phone", phone)], userKey: key(10).publicKey), .verified)
    }

    /// docs/E2E.md §3.4's vector (computed by tools/e2e_vectors.py from the text; read from the
    /// document): bob's list with his device "phone" (IK_B of §11), user key seed `key(0xc0)`, counter 1.
    func testTheDocumentedDeviceListVector() throws {
        let text = try documentText("docs/E2E.md")
        let section = try XCTUnwrap(text.components(separatedBy: "### 3.4 ").dropFirst().first?.components(separatedBy: "\n## ").first)
        let block = try XCTUnwrap(section.components(separatedBy: "```").dropFirst().first, "the vector's code block")
        let documented = block.filter(\.isHexDigit)
        XCTAssertEqual(documented.count, 2 * 183)
        let seed = (0..<32).map { UInt8((0xC0 + $0) % 256) }
        let userKey = try UserSigningKey(secretBytes: [1] + seed)
        let bob = try DeviceIdentity(secretBytes: [1] + (0..<32).map { UInt8(0x50 + $0) } + (0..<32).map { UInt8(0x70 + $0) }).publicKey
        let list = try SignedDeviceList.signed(user: "bob", counter: 1, devices: [ApprovedDevice(device: "phone", identity: bob)], by: userKey)
        let decoded = try SignedDeviceList(encoded: Self.bytes(hex: documented))
        XCTAssertEqual(decoded.userKey, userKey.publicKey)
        XCTAssertEqual(decoded.devices, list.devices)
        #if os(Linux) // RFC 8032 signatures, as BoringSSL makes them
        XCTAssertEqual(list.encoded.map { String(format2: $0) }.joined(), documented)
        #endif
    }

    private static func bytes(hex: String) -> [UInt8] {
        let digits = Array(hex.utf8)
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
    }

    func testTheUserKeyKeepsItsSeedAndRedactsItsDescription() throws {
        let original = key(9)
        let restored = try UserSigningKey(secretBytes: original.secretBytes.bytes)
        XCTAssertEqual(restored.publicKey, original.publicKey)
        XCTAssertEqual(original.secretBytes.bytes.count, 33)
        XCTAssertFalse("\(original)".contains(original.publicKey.map { String(format2: $0) }.joined()))
    }
}
