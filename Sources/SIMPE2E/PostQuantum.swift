import Crypto

/// A signed ML-KEM-768 prekey (docs/E2E.md §4.1), the optional post-quantum part of a bundle:
/// a session started with it stays secret even against an attacker who records it now and
/// breaks X25519 later.
public struct KEMPrekey: Hashable, Sendable {
    public static let publicKeySize = 1_184
    public static let ciphertextSize = 1_088
    /// Bytes in a bundle: id (u32) ‖ public key ‖ signature.
    public static let encodedSize = 4 + publicKeySize + 64

    public let id: UInt32
    public let publicKey: [UInt8]
    /// The identity's Ed25519 signature of `signedMessage(id:publicKey:)`.
    public let signature: [UInt8]

    public init(id: UInt32, publicKey: [UInt8], signature: [UInt8]) {
        (self.id, self.publicKey, self.signature) = (id, publicKey, signature)
    }

    /// "SIMP-E2E v1 kem prekey" ‖ id (u32) ‖ public key (1,184).
    public static func signedMessage(id: UInt32, publicKey: [UInt8]) -> [UInt8] {
        prekeySignedMessage(label: "SIMP-E2E v1 kem prekey", id: id, publicKey: publicKey)
    }

    /// Encapsulates a fresh shared secret to this prekey: (shared secret, ciphertext).
    func encapsulate() throws -> (sharedSecret: [UInt8], ciphertext: [UInt8]) {
        guard let key = try? MLKEM768.PublicKey(rawRepresentation: publicKey) else { throw E2EError.invalidKey("kem prekey") }
        let result = try key.encapsulate()
        return (result.sharedSecret.withUnsafeBytes { Array($0) }, Array(result.encapsulated))
    }

    /// The private key from its 64-byte seed (d ‖ z of FIPS 203).
    static func privateKey(seed: [UInt8]) throws -> MLKEM768.PrivateKey {
        try MLKEM768.PrivateKey(seedRepresentation: seed, publicKey: nil)
    }

    /// The shared secret in `ciphertext`, for the holder of `seed`.
    static func decapsulate(_ ciphertext: [UInt8], seed: [UInt8]) throws -> [UInt8] {
        guard let shared = try? privateKey(seed: seed).decapsulate(ciphertext) else { throw E2EError.invalidKey("kem ciphertext") }
        return shared.withUnsafeBytes { Array($0) }
    }
}

/// The KEM ciphertext a prekey message carries when the bundle had a KEM prekey.
public struct KEMEncapsulation: Equatable, Sendable {
    public let prekeyID: UInt32
    public let ciphertext: [UInt8]
}
