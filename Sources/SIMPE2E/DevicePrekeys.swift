import Crypto

/// The private halves of a device's prekeys: its signed prekeys (the current one and the one
/// before, kept for session starts still in flight) and its unused one-time prekeys.
public struct DevicePrekeys: Sendable, RedactedReflection {
    /// Signed prekey private keys (raw X25519) by id.
    private var signedPrivate: [UInt32: SecretBytes] = [:]
    /// The published signed prekey.
    public private(set) var currentSigned: SignedPrekey
    private var previousSignedID: UInt32?
    /// One-time prekey private keys by id; removed when a session start uses one.
    private var oneTimePrivate: [UInt32: SecretBytes] = [:]
    /// The published ML-KEM-768 prekey, if this device offers one, and its 64-byte seed.
    public private(set) var currentKEM: KEMPrekey?
    private var kemSeed: SecretBytes?
    private var nextID: UInt32

    /// Makes a first signed prekey (id 1), signed by `identity`.
    public init(identity: DeviceIdentity, using random: inout some RandomNumberGenerator) {
        let key = random.agreementKey()
        currentSigned = Self.sign(key, id: 1, identity: identity)
        signedPrivate[1] = SecretBytes(Array(key.rawRepresentation))
        nextID = 2
    }

    /// Replaces the signed prekey by a new one; the previous one is still accepted, the one before
    /// it is forgotten (sessions it started long ago are unaffected).
    public mutating func rotateSignedPrekey(identity: DeviceIdentity, using random: inout some RandomNumberGenerator) {
        if let old = previousSignedID { signedPrivate[old] = nil }
        previousSignedID = currentSigned.id
        let key = random.agreementKey()
        currentSigned = Self.sign(key, id: takeID(), identity: identity)
        signedPrivate[currentSigned.id] = SecretBytes(Array(key.rawRepresentation))
    }

    /// Makes `count` new one-time prekeys and returns their public halves, to publish.
    public mutating func makeOneTimePrekeys(_ count: Int, using random: inout some RandomNumberGenerator) -> [OneTimePrekey] {
        (0..<count).map { _ in
            let key = random.agreementKey()
            let id = takeID()
            oneTimePrivate[id] = SecretBytes(Array(key.rawRepresentation))
            return OneTimePrekey(id: id, publicKey: Array(key.publicKey.rawRepresentation))
        }
    }

    /// Makes (or replaces) the signed ML-KEM-768 prekey from a 64-byte seed drawn from `random`:
    /// later bundles offer post-quantum session starts (docs/E2E.md §4.1).
    public mutating func makeKEMPrekey(identity: DeviceIdentity, using random: inout some RandomNumberGenerator) {
        let seed = random.bytes(64)
        let publicKey = Array(try! KEMPrekey.privateKey(seed: seed).publicKey.rawRepresentation)
        let id = takeID()
        currentKEM = KEMPrekey(
            id: id, publicKey: publicKey,
            signature: identity.sign(KEMPrekey.signedMessage(id: id, publicKey: publicKey)))
        kemSeed = SecretBytes(seed)
    }

    /// The bundle to publish: identity, current signed prekey, the given one-time prekeys, and
    /// the KEM prekey if there is one.
    public func bundle(identity: DeviceIdentity, oneTimePrekeys: [OneTimePrekey]) -> KeyBundle {
        KeyBundle(identity: identity.publicKey, signedPrekey: currentSigned, oneTimePrekeys: oneTimePrekeys, kemPrekey: currentKEM)
    }

    /// How many one-time prekeys are unused (publish more when low).
    public var unusedOneTimePrekeyCount: Int { oneTimePrivate.count }

    func signedPrekey(id: UInt32) throws -> Curve25519.KeyAgreement.PrivateKey {
        guard let raw = signedPrivate[id] else { throw E2EError.unknownPrekey("signed prekey \(id)") }
        return try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: raw.bytes)
    }

    func oneTimePrekey(id: UInt32) throws -> Curve25519.KeyAgreement.PrivateKey {
        guard let raw = oneTimePrivate[id] else { throw E2EError.unknownPrekey("one-time prekey \(id)") }
        return try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: raw.bytes)
    }

    func kemSharedSecret(_ encapsulation: KEMEncapsulation) throws -> [UInt8] {
        guard let kemSeed, currentKEM?.id == encapsulation.prekeyID else {
            throw E2EError.unknownPrekey("kem prekey \(encapsulation.prekeyID)")
        }
        return try KEMPrekey.decapsulate(encapsulation.ciphertext, seed: kemSeed.bytes)
    }

    /// Forgets a one-time prekey once a session start that used it has succeeded.
    mutating func consumeOneTimePrekey(id: UInt32) { oneTimePrivate[id] = nil }

    private mutating func takeID() -> UInt32 {
        defer { nextID &+= 1 }
        return nextID
    }

    private static func sign(_ key: Curve25519.KeyAgreement.PrivateKey, id: UInt32, identity: DeviceIdentity) -> SignedPrekey {
        let publicKey = Array(key.publicKey.rawRepresentation)
        return SignedPrekey(
            id: id, publicKey: publicKey,
            signature: identity.sign(SignedPrekey.signedMessage(id: id, publicKey: publicKey)))
    }

    public var description: String {
        "DevicePrekeys(signed \(currentSigned.id), \(oneTimePrivate.count) one-time, private keys redacted)"
    }
}

extension DevicePrekeys {
    /// The persistent form (docs/E2E.md §9): version 1, next id, current signed prekey with its
    /// signature, previous signed id, then (id, private key) lists. Secret: store it like the identity.
    public var secretBytes: SecretBytes {
        var writer = ByteWriter()
        writer.u8(1)
        writer.u32(nextID)
        writer.u32(currentSigned.id)
        writer.raw(currentSigned.publicKey)
        writer.raw(currentSigned.signature)
        writer.u32(previousSignedID ?? 0)
        for keys in [signedPrivate, oneTimePrivate] {
            writer.u32(UInt32(keys.count))
            for (id, key) in keys.sorted(by: { $0.key < $1.key }) {
                writer.u32(id)
                writer.raw(key.bytes)
            }
        }
        if let currentKEM, let kemSeed {
            writer.u32(currentKEM.id)
            writer.raw(currentKEM.publicKey)
            writer.raw(currentKEM.signature)
            writer.raw(kemSeed.bytes)
        }
        return SecretBytes(writer.bytes)
    }

    /// Restores prekeys from `secretBytes`.
    public init(secretBytes: [UInt8]) throws {
        var reader = ByteReader(secretBytes, reading: "device prekeys")
        try reader.expectVersion(1)
        nextID = try reader.u32()
        currentSigned = SignedPrekey(id: try reader.u32(), publicKey: try reader.key(), signature: try reader.raw(64))
        let previous = try reader.u32()
        previousSignedID = previous == 0 ? nil : previous
        signedPrivate = try Self.readKeys(&reader)
        oneTimePrivate = try Self.readKeys(&reader)
        if reader.remainingCount > 0 {
            currentKEM = KEMPrekey(id: try reader.u32(), publicKey: try reader.raw(KEMPrekey.publicKeySize), signature: try reader.raw(64))
            kemSeed = SecretBytes(try reader.raw(64))
        }
        try reader.expectEnd()
    }

    private static func readKeys(_ reader: inout ByteReader) throws -> [UInt32: SecretBytes] {
        let count = try reader.u32()
        guard Int(count) * 36 <= reader.remainingCount else { throw E2EError.malformed("device prekeys: key count \(count)") }
        var keys: [UInt32: SecretBytes] = [:]
        for _ in 0..<count { keys[try reader.u32()] = SecretBytes(try reader.key()) }
        return keys
    }
}
