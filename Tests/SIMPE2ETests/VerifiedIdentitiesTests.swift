import SIMPCore
import XCTest

@testable import SIMPE2E

/// What a verification means for sending (docs/E2E.md §10), and who may ask for a message
/// again (§7.5).
final class VerifiedIdentitiesTests: XCTestCase {
    private func identity(_ seed: UInt64) -> IdentityKey {
        var random = SplitMix64(seed: seed)
        return DeviceIdentity(using: &random).publicKey
    }

    func testAChangedOrNewDeviceOfAVerifiedPeerIsAChange() {
        let (laptop, phone, other) = (identity(1), identity(2), identity(3))
        let verified = VerifiedIdentities([("laptop", laptop), ("phone", phone)])
        XCTAssertEqual(verified.check([("laptop", laptop), ("phone", phone)]), .verified)
        XCTAssertEqual(verified.check([("laptop", laptop)]), .verified, "a device gone is no change to refuse")
        XCTAssertEqual(verified.check([("laptop", other), ("phone", phone)]), .changed(devices: ["laptop"]))
        XCTAssertEqual(verified.check([("laptop", laptop), ("phone", phone), ("ghost", other)]), .changed(devices: ["ghost"]))
        XCTAssertTrue(verified.isVerified(device: "phone", identity: phone))
        XCTAssertFalse(verified.isVerified(device: "phone", identity: other))
    }

    func testTheKeptFormRoundTripsAndSkipsBadLines() {
        let verified = VerifiedIdentities([("laptop", identity(1)), ("phone", identity(2))])
        XCTAssertEqual(VerifiedIdentities(encoded: verified.encoded), verified)
        let text = String(decoding: verified.encoded, as: UTF8.self)
        XCTAssertTrue(text.hasPrefix("laptop "), text)
        XCTAssertEqual(VerifiedIdentities(encoded: verified.encoded + Array("\nbroken line here\nphone zz".utf8)), verified)
        XCTAssertTrue(VerifiedIdentities(encoded: []).identities.isEmpty)
    }

    /// Only a device that had a copy of the message, with the identity it had then, may have it
    /// again: not a device added since (by its user, or made up by the relay), not a new key.
    func testOnlyARecipientWithItsIdentityThenMayAskAgain() {
        let (phone, laptop, ghost) = (identity(1), identity(2), identity(3))
        let recipients = ResendRecipients(copies: ["phone", "laptop"], known: [("phone", phone), ("laptop", laptop), ("tablet", ghost)])
        XCTAssertTrue(recipients.allows(device: "phone", identity: phone))
        XCTAssertTrue(recipients.allows(device: "laptop", identity: laptop))
        XCTAssertFalse(recipients.allows(device: "ghost", identity: ghost), "not a recipient")
        XCTAssertFalse(recipients.allows(device: "tablet", identity: ghost), "known, but had no copy")
        XCTAssertFalse(recipients.allows(device: "phone", identity: ghost), "another key since")
        XCTAssertFalse(recipients.allows(device: "phone", identity: nil))
    }
}
