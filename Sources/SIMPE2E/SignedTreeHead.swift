import Crypto

/// The relay's key for signing its key directory's tree heads (docs/E2E.md §18.3): Ed25519.
/// Relays sharing one store share it (they serve one log). Persist `secretBytes`; its
/// description is redacted.
public struct TreeHeadSigningKey: Sendable, RedactedReflection {
    let key: Curve25519.Signing.PrivateKey

    /// Makes a key from `random` (32 bytes of seed).
    public init(using random: inout some RandomNumberGenerator) {
        key = try! Curve25519.Signing.PrivateKey(rawRepresentation: random.bytes(32))
    }

    /// Restores a key from `secretBytes` (version 1: 0x01 ‖ Ed25519 seed).
    public init(secretBytes: [UInt8]) throws {
        var reader = ByteReader(secretBytes, reading: "tree head signing key")
        try reader.expectVersion(1)
        key = try Curve25519.Signing.PrivateKey(rawRepresentation: try reader.key())
        try reader.expectEnd()
    }

    /// The 33-byte persistent form.
    public var secretBytes: SecretBytes { SecretBytes([1] + Array(key.rawRepresentation)) }

    /// The Ed25519 public key (32 bytes) clients check tree heads with.
    public var publicKey: [UInt8] { Array(key.publicKey.rawRepresentation) }

    public var description: String { "TreeHeadSigningKey(private key redacted)" }
}

/// A point of the directory log: its size and root hash. In an end-to-end message it is the
/// 40-byte gossip field `u64 size ‖ root (32)` (docs/E2E.md §18.5).
public struct DirectoryCheckpoint: Equatable, Hashable, Sendable {
    /// The encoded size of a checkpoint.
    public static let encodedSize = 40

    public let size: UInt64
    public let root: [UInt8]

    public init(size: UInt64, root: [UInt8]) {
        self.size = size
        self.root = root
    }

    /// `u64 size ‖ root`.
    public var encoded: [UInt8] {
        var writer = ByteWriter()
        writer.u64(size)
        writer.raw(root)
        return writer.bytes
    }

    /// Decodes the 40-byte form.
    /// - Throws: `E2EError.malformed` for any other length.
    public init(encoded: [UInt8]) throws {
        var reader = ByteReader(encoded, reading: "directory checkpoint")
        size = try reader.u64()
        root = try reader.key()
        try reader.expectEnd()
    }
}

/// The relay's signed statement of its directory log (docs/E2E.md §18.3):
/// `0x01 ‖ u64 size ‖ root (32) ‖ u64 time (ms since 1970) ‖ signature (64)`, 113 bytes, the
/// signature `Sign(relay tree key, "SIMP-E2E v1 tree head" ‖ the 49 bytes before it)`.
public struct SignedTreeHead: Equatable, Sendable {
    /// The context string signed before the head's bytes.
    public static let context = Array("SIMP-E2E v1 tree head".utf8)
    /// The encoded size.
    public static let encodedSize = 113

    public let checkpoint: DirectoryCheckpoint
    /// When the relay signed it, milliseconds since 1970 (UTC).
    public let timestampMillis: UInt64
    public let signature: [UInt8]
    public let encoded: [UInt8]

    /// The head's size.
    public var size: UInt64 { checkpoint.size }
    /// The head's root hash.
    public var root: [UInt8] { checkpoint.root }

    /// Signs the head of a log of `size` leaves with root `root`, at `timestampMillis`.
    public static func signed(size: UInt64, root: [UInt8], timestampMillis: UInt64, by key: TreeHeadSigningKey) throws -> SignedTreeHead {
        let body = signedBody(size: size, root: root, timestampMillis: timestampMillis)
        let signature = Array(try key.key.signature(for: context + body))
        return try SignedTreeHead(encoded: body + signature, verifyingWith: key.publicKey)
    }

    /// Decodes a head and checks its signature with `relayKey` (the relay's tree key).
    /// - Throws: `E2EError.malformed`, `.unsupportedVersion`, `.invalidKey`, `.authenticationFailed`.
    public init(encoded: [UInt8], verifyingWith relayKey: [UInt8]) throws {
        var reader = ByteReader(encoded, reading: "tree head")
        try reader.expectVersion(1)
        let size = try reader.u64()
        let root = try reader.key()
        timestampMillis = try reader.u64()
        let signed = reader.offset
        signature = try reader.raw(64)
        try reader.expectEnd()
        guard relayKey.count == 32, PublicKeyCheck.isUsableSigningKey(relayKey),
            let key = try? Curve25519.Signing.PublicKey(rawRepresentation: relayKey)
        else { throw E2EError.invalidKey("relay tree key") }
        guard key.isValidSignature(signature, for: Self.context + Array(encoded[..<signed])) else {
            throw E2EError.authenticationFailed
        }
        checkpoint = DirectoryCheckpoint(size: size, root: root)
        self.encoded = encoded
    }

    private static func signedBody(size: UInt64, root: [UInt8], timestampMillis: UInt64) -> [UInt8] {
        var writer = ByteWriter()
        writer.u8(1)
        writer.u64(size)
        writer.raw(root)
        writer.u64(timestampMillis)
        return writer.bytes
    }
}
