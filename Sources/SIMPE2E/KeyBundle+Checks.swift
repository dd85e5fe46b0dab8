import Crypto

/// The checks of a key bundle before anyone relies on it (docs/E2E.md §3.3): the relay makes
/// them when a device publishes, and a sender makes them again on what the relay hands out. A
/// bundle passes when it decodes, its identity signed its prekeys, and none of its public keys
/// is of small order (an X25519 key every agreement with gives the same, guessable secret; an
/// Ed25519 key for which one signature can verify for many messages).
extension KeyBundle {
    /// `encoded` decoded and checked (`checkKeys`, `verify`); throws `E2EError` naming what is
    /// wrong (`malformed`, `unsupportedVersion`, `invalidKey`, `badPrekeySignature`).
    public static func checked(_ encoded: [UInt8]) throws -> KeyBundle {
        let bundle = try KeyBundle(encoded: encoded)
        try bundle.checkKeys()
        try bundle.verify()
        return bundle
    }

    /// Throws `E2EError.invalidKey` naming the first public key of small order.
    public func checkKeys() throws {
        guard PublicKeyCheck.isUsableSigningKey(identity.signing) else { throw E2EError.invalidKey("identity signing key (small order)") }
        guard PublicKeyCheck.isUsableAgreementKey(identity.agreement) else { throw E2EError.invalidKey("identity agreement key (low order)") }
        guard PublicKeyCheck.isUsableAgreementKey(signedPrekey.publicKey) else { throw E2EError.invalidKey("signed prekey (low order)") }
        for prekey in oneTimePrekeys where !PublicKeyCheck.isUsableAgreementKey(prekey.publicKey) {
            throw E2EError.invalidKey("one-time prekey \(prekey.id) (low order)")
        }
    }
}

/// Whether a public key can be used at all (docs/E2E.md §3.3).
public enum PublicKeyCheck {
    /// A fixed private key: any clamped scalar is a multiple of 8, so the agreement with a
    /// low-order point is all zeros, whichever scalar it is.
    private static let probe = try! Curve25519.KeyAgreement.PrivateKey(rawRepresentation: [UInt8](repeating: 0x5A, count: 32))

    /// Whether `key` (32 bytes) is an X25519 public key whose agreement with a fixed private key
    /// is not all zeros: false for the low-order points (and any encoding of them).
    public static func isUsableAgreementKey(_ key: [UInt8]) -> Bool {
        (try? E2EKDF.agree(probe, key, "probe")) != nil
    }

    /// Whether `key` (32 bytes) is an Ed25519 public key that is not one of the eight points of
    /// small order (in any encoding: the sign bit is ignored, and `p` and `p + 1` encode 0 and 1).
    public static func isUsableSigningKey(_ key: [UInt8]) -> Bool {
        guard key.count == 32 else { return false }
        var y = key
        y[31] &= 0x7F
        return !smallOrderY.contains(y)
    }

    /// The y coordinates (little-endian, sign bit clear) of the Ed25519 points of order 1, 2,
    /// 4 and 8: 0, 1, p - 1, the two of order 8, and the non-canonical p and p + 1.
    static let smallOrderY: Set<[UInt8]> = {
        let orderEight: [UInt8] = [
            0x26, 0xE8, 0x95, 0x8F, 0xC2, 0xB2, 0x27, 0xB0, 0x45, 0xC3, 0xF4, 0x89, 0xF2, 0xEF, 0x98, 0xF0,
            0xD5, 0xDF, 0xAC, 0x05, 0xD3, 0xC6, 0x33, 0x39, 0xB1, 0x38, 0x02, 0x88, 0x6D, 0x53, 0xFC, 0x05,
        ]
        let otherOrderEight: [UInt8] = [
            0xC7, 0x17, 0x6A, 0x70, 0x3D, 0x4D, 0xD8, 0x4F, 0xBA, 0x3C, 0x0B, 0x76, 0x0D, 0x10, 0x67, 0x0F,
            0x2A, 0x20, 0x53, 0xFA, 0x2C, 0x39, 0xCC, 0xC6, 0x4E, 0xC7, 0xFD, 0x77, 0x92, 0xAC, 0x03, 0x7A,
        ]
        func nearPrime(_ low: UInt8) -> [UInt8] { [low] + [UInt8](repeating: 0xFF, count: 30) + [0x7F] }
        let zero = [UInt8](repeating: 0, count: 32)
        return [zero, [1] + zero.dropFirst(), nearPrime(0xEC), nearPrime(0xED), nearPrime(0xEE), orderEight, otherOrderEight]
    }()
}
