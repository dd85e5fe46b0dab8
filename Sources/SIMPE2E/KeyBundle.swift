/// A signed prekey as published: id, X25519 public key, and the identity's Ed25519 signature
/// of `SignedPrekey.signedMessage(id:publicKey:)`.
public struct SignedPrekey: Hashable, Sendable {
    public let id: UInt32
    public let publicKey: [UInt8]
    public let signature: [UInt8]

    public init(id: UInt32, publicKey: [UInt8], signature: [UInt8]) {
        (self.id, self.publicKey, self.signature) = (id, publicKey, signature)
    }

    /// "SIMP-E2E v1 signed prekey" ‖ id (u32) ‖ public key (32): the bytes the identity signs.
    public static func signedMessage(id: UInt32, publicKey: [UInt8]) -> [UInt8] {
        prekeySignedMessage(label: "SIMP-E2E v1 signed prekey", id: id, publicKey: publicKey)
    }
}

/// label ‖ id (u32) ‖ public key: what an identity signs to vouch for one of its prekeys.
func prekeySignedMessage(label: String, id: UInt32, publicKey: [UInt8]) -> [UInt8] {
    var writer = ByteWriter()
    writer.raw(Array(label.utf8))
    writer.u32(id)
    writer.raw(publicKey)
    return writer.bytes
}

/// A one-time prekey as published: id and X25519 public key.
public struct OneTimePrekey: Hashable, Sendable {
    public let id: UInt32
    public let publicKey: [UInt8]

    public init(id: UInt32, publicKey: [UInt8]) { (self.id, self.publicKey) = (id, publicKey) }
}

/// What a device publishes through the relay so that others can start a session with it while
/// it is offline (docs/E2E.md §3). The relay stores `encoded` opaquely; when a sender asks for
/// the bundle, the relay hands out one with at most one one-time prekey (`claimingOneTimePrekey`)
/// and deletes that prekey.
public struct KeyBundle: Hashable, Sendable {
    public static let version: UInt8 = 1
    /// Bytes before the one-time prekeys: version, identity, signed prekey, count.
    public static let fixedSize = 1 + 64 + 4 + 32 + 64 + 2
    /// Bytes per one-time prekey: id (u32) ‖ public key (32).
    public static let oneTimePrekeySize = 36

    public let identity: IdentityKey
    public let signedPrekey: SignedPrekey
    public let oneTimePrekeys: [OneTimePrekey]
    /// The optional post-quantum prekey, after the one-time prekeys.
    public let kemPrekey: KEMPrekey?

    public init(identity: IdentityKey, signedPrekey: SignedPrekey, oneTimePrekeys: [OneTimePrekey], kemPrekey: KEMPrekey? = nil) {
        self.identity = identity
        self.signedPrekey = signedPrekey
        self.oneTimePrekeys = oneTimePrekeys
        self.kemPrekey = kemPrekey
    }

    /// Throws `badPrekeySignature` unless the identity signed the signed prekey (and KEM prekey).
    public func verify() throws {
        let message = SignedPrekey.signedMessage(id: signedPrekey.id, publicKey: signedPrekey.publicKey)
        guard identity.isValidSignature(signedPrekey.signature, of: message) else { throw E2EError.badPrekeySignature }
        if let kemPrekey,
            !identity.isValidSignature(
                kemPrekey.signature, of: KEMPrekey.signedMessage(id: kemPrekey.id, publicKey: kemPrekey.publicKey))
        {
            throw E2EError.badPrekeySignature
        }
    }

    /// The bundle a sender gets: the first one-time prekey only (none if none are left), and the
    /// bundle that stays, without it.
    public func claimingOneTimePrekey() -> (handedOut: KeyBundle, remaining: KeyBundle) {
        (
            KeyBundle(identity: identity, signedPrekey: signedPrekey, oneTimePrekeys: Array(oneTimePrekeys.prefix(1)), kemPrekey: kemPrekey),
            KeyBundle(identity: identity, signedPrekey: signedPrekey, oneTimePrekeys: Array(oneTimePrekeys.dropFirst()), kemPrekey: kemPrekey)
        )
    }

    /// The version 1 encoding of docs/E2E.md §3.
    public var encoded: [UInt8] {
        var writer = ByteWriter()
        writer.u8(Self.version)
        writer.raw(identity.encoded)
        writer.u32(signedPrekey.id)
        writer.raw(signedPrekey.publicKey)
        writer.raw(signedPrekey.signature)
        writer.u16(UInt16(oneTimePrekeys.count))
        for prekey in oneTimePrekeys {
            writer.u32(prekey.id)
            writer.raw(prekey.publicKey)
        }
        if let kemPrekey {
            writer.u32(kemPrekey.id)
            writer.raw(kemPrekey.publicKey)
            writer.raw(kemPrekey.signature)
        }
        return writer.bytes
    }

    /// Decodes `encoded`; does not check the signature (call `verify`).
    public init(encoded: [UInt8]) throws {
        var reader = ByteReader(encoded, reading: "key bundle")
        try reader.expectVersion(Self.version)
        identity = try IdentityKey(reading: &reader)
        signedPrekey = SignedPrekey(id: try reader.u32(), publicKey: try reader.key(), signature: try reader.raw(64))
        let count = Int(try reader.u16())
        var prekeys: [OneTimePrekey] = []
        for _ in 0..<count { prekeys.append(OneTimePrekey(id: try reader.u32(), publicKey: try reader.key())) }
        oneTimePrekeys = prekeys
        kemPrekey =
            reader.remainingCount == 0
            ? nil
            : KEMPrekey(id: try reader.u32(), publicKey: try reader.raw(KEMPrekey.publicKeySize), signature: try reader.raw(64))
        try reader.expectEnd()
    }
}

/// How the relay keeps bundles (docs/PROTOCOL.md §4.8): the fixed part and the one-time
/// prekeys apart, so that it hands out one prekey per fetch without reading either.
extension KeyBundle {
    /// This bundle with no one-time prekeys (what KEYS_PUBLISH carries in `keyBundles`).
    public var withoutOneTimePrekeys: KeyBundle {
        KeyBundle(identity: identity, signedPrekey: signedPrekey, oneTimePrekeys: [], kemPrekey: kemPrekey)
    }

    /// This bundle with `oneTimePrekey` (one the relay claimed) in place of its own prekeys.
    public func with(oneTimePrekey: OneTimePrekey?) -> KeyBundle {
        KeyBundle(identity: identity, signedPrekey: signedPrekey, oneTimePrekeys: oneTimePrekey.map { [$0] } ?? [], kemPrekey: kemPrekey)
    }
}

extension OneTimePrekey {
    /// id (u32) ‖ X25519 public key (32): the 36 bytes of one published one-time prekey.
    public var encoded: [UInt8] {
        var writer = ByteWriter()
        writer.u32(id)
        writer.raw(publicKey)
        return writer.bytes
    }

    public init(encoded: [UInt8]) throws {
        var reader = ByteReader(encoded, reading: "one-time prekey")
        self.init(id: try reader.u32(), publicKey: try reader.key())
        try reader.expectEnd()
    }
}
