import Crypto

/// The public half of a device identity: what a peer pins, what safety numbers are computed
/// from. Encoded as agreement key (32) ‖ signing key (32).
public struct IdentityKey: Hashable, Sendable, CustomStringConvertible {
    /// X25519 public key, used in the session start.
    public let agreement: [UInt8]
    /// Ed25519 public key, which signs the device's prekeys.
    public let signing: [UInt8]

    public init(agreement: [UInt8], signing: [UInt8]) throws {
        guard agreement.count == 32, signing.count == 32,
            (try? Curve25519.Signing.PublicKey(rawRepresentation: signing)) != nil
        else {
            throw E2EError.invalidKey("identity key")
        }
        self.agreement = agreement
        self.signing = signing
    }

    init(reading reader: inout ByteReader) throws {
        try self.init(agreement: try reader.key(), signing: try reader.key())
    }

    /// The 64 bytes agreement ‖ signing.
    public var encoded: [UInt8] { agreement + signing }

    /// Whether `signature` is this identity's Ed25519 signature of `message`.
    public func isValidSignature(_ signature: [UInt8], of message: [UInt8]) -> Bool {
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: signing) else { return false }
        return key.isValidSignature(signature, for: message)
    }

    /// Public keys are not secret; the first bytes in hex are enough to tell two apart in logs.
    public var description: String {
        "IdentityKey(" + agreement.prefix(4).map { String(format2: $0) }.joined() + "…)"
    }
}

/// A device's long-term identity: an X25519 key for agreement and an Ed25519 key for
/// signatures, made once on first run. Persist `secretBytes`; its description is redacted.
public struct DeviceIdentity: Sendable, RedactedReflection {
    /// The X25519 private key.
    public let agreementKey: Curve25519.KeyAgreement.PrivateKey
    /// The Ed25519 private key.
    public let signingKey: Curve25519.Signing.PrivateKey

    /// Makes a device identity from `random`.
    public init(using random: inout some RandomNumberGenerator) {
        agreementKey = random.agreementKey()
        signingKey = try! Curve25519.Signing.PrivateKey(rawRepresentation: random.bytes(32))
    }

    /// Restores an identity from `secretBytes` (version 1: 0x01 ‖ X25519 private ‖ Ed25519 seed).
    public init(secretBytes: [UInt8]) throws {
        var reader = ByteReader(secretBytes, reading: "device identity")
        try reader.expectVersion(1)
        agreementKey = try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: try reader.key())
        signingKey = try Curve25519.Signing.PrivateKey(rawRepresentation: try reader.key())
        try reader.expectEnd()
    }

    /// The 65-byte persistent form; keep it where only the user can read it (mode 0600).
    public var secretBytes: SecretBytes {
        SecretBytes([1] + Array(agreementKey.rawRepresentation) + Array(signingKey.rawRepresentation))
    }

    /// The public half.
    public var publicKey: IdentityKey {
        try! IdentityKey(
            agreement: Array(agreementKey.publicKey.rawRepresentation),
            signing: Array(signingKey.publicKey.rawRepresentation))
    }

    /// Ed25519 signature of `message`.
    func sign(_ message: [UInt8]) -> [UInt8] {
        Array(try! signingKey.signature(for: message))
    }

    public var description: String { "DeviceIdentity(\(publicKey), private keys redacted)" }
}

extension String {
    /// Two lowercase hex digits.
    init(format2 byte: UInt8) {
        let digits = Array("0123456789abcdef")
        self.init([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
    }
}
