import SIMPCore
import XCTest

@testable import SIMPE2E

/// What the relay and every sender check of a bundle before relying on it (docs/E2E.md §3.3):
/// it decodes, its prekeys are signed by its identity, and no public key is of small order.
final class KeyBundleChecksTests: XCTestCase {
    private func device(_ seed: UInt64) -> (DeviceIdentity, DevicePrekeys) {
        var random = SplitMix64(seed: seed)
        let identity = DeviceIdentity(using: &random)
        return (identity, DevicePrekeys(identity: identity, using: &random))
    }

    func testAnHonestBundlePasses() throws {
        let (identity, prekeys) = device(1)
        let bundle = prekeys.bundle(identity: identity, oneTimePrekeys: [])
        XCTAssertEqual(try KeyBundle.checked(bundle.encoded), bundle)
    }

    /// A bundle whose identity agreement key, signed prekey or one-time prekey is a low-order
    /// X25519 point (0, 1, an order-8 point, p - 1, and with the top bit set) is refused, even
    /// when correctly signed; so is one whose Ed25519 key is of small order.
    func testALowOrderKeyIsRefusedThoughSigned() throws {
        let (identity, prekeys) = device(2)
        let orderEight: [UInt8] = [
            0xE0, 0xEB, 0x7A, 0x7C, 0x3B, 0x41, 0xB8, 0xAE, 0x16, 0x56, 0xE3, 0xFA, 0xF1, 0x9F, 0xC4, 0x6A,
            0xDA, 0x09, 0x8D, 0xEB, 0x9C, 0x32, 0xB1, 0xFD, 0x86, 0x62, 0x05, 0x16, 0x5F, 0x49, 0xB8, 0x00,
        ]
        let zero = [UInt8](repeating: 0, count: 32)
        let lowOrder = [zero, [1] + zero.dropFirst(), orderEight, [0xEC] + [UInt8](repeating: 0xFF, count: 30) + [0x7F], zero.dropLast() + [0x80]]
        for point in lowOrder {
            XCTAssertFalse(PublicKeyCheck.isUsableAgreementKey(point), "\(point)")
            let signed = SignedPrekey(id: 9, publicKey: point, signature: identity.sign(SignedPrekey.signedMessage(id: 9, publicKey: point)))
            let bundle = KeyBundle(identity: identity.publicKey, signedPrekey: signed, oneTimePrekeys: [])
            XCTAssertThrowsError(try KeyBundle.checked(bundle.encoded)) { XCTAssertEqual($0 as? E2EError, .invalidKey("signed prekey (low order)")) }
            let withPrekey = prekeys.bundle(identity: identity, oneTimePrekeys: [OneTimePrekey(id: 4, publicKey: point)])
            XCTAssertThrowsError(try KeyBundle.checked(withPrekey.encoded)) {
                XCTAssertEqual($0 as? E2EError, .invalidKey("one-time prekey 4 (low order)"))
            }
            let badIdentity = try IdentityKey(agreement: point, signing: identity.publicKey.signing)
            let forged = KeyBundle(identity: badIdentity, signedPrekey: prekeys.currentSigned, oneTimePrekeys: [])
            XCTAssertThrowsError(try KeyBundle.checked(forged.encoded)) {
                XCTAssertEqual($0 as? E2EError, .invalidKey("identity agreement key (low order)"))
            }
        }
        XCTAssertTrue(PublicKeyCheck.isUsableAgreementKey(identity.publicKey.agreement))
        for y in PublicKeyCheck.smallOrderY {
            XCTAssertFalse(PublicKeyCheck.isUsableSigningKey(y))
            XCTAssertFalse(PublicKeyCheck.isUsableSigningKey(y.dropLast() + [y[31] | 0x80]), "the sign bit does not matter")
        }
        XCTAssertEqual(PublicKeyCheck.smallOrderY.count, 7)
        XCTAssertTrue(PublicKeyCheck.isUsableSigningKey(identity.publicKey.signing))
    }

    func testABadSignatureOrUndecodableBytesAreRefused() throws {
        let (identity, prekeys) = device(3)
        var bytes = prekeys.bundle(identity: identity, oneTimePrekeys: []).encoded
        bytes[100] ^= 1 // inside the signature
        XCTAssertThrowsError(try KeyBundle.checked(bytes)) { XCTAssertEqual($0 as? E2EError, .badPrekeySignature) }
        XCTAssertThrowsError(try KeyBundle.checked([1] + [UInt8](repeating: 7, count: 164) + [0, 0]))
        XCTAssertThrowsError(try KeyBundle.checked(Array(bytes.prefix(100))))
    }
}
