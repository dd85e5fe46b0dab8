import Crypto

/// The key derivations of docs/E2E.md §4-§6: HKDF-SHA-256 and HMAC-SHA-256 with the info
/// strings below. Each function is named after the step it performs in the spec.
enum E2EKDF {
    static let sessionStartInfo = Array("SIMP-E2E v1 session start".utf8)
    static let rootInfo = Array("SIMP-E2E v1 ratchet".utf8)
    static let messageInfo = Array("SIMP-E2E v1 message".utf8)
    static let roomMessageInfo = Array("SIMP-E2E v1 room message".utf8)

    static func hkdf(ikm: [UInt8], salt: [UInt8], info: [UInt8], count: Int) -> [UInt8] {
        let key = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: ikm), salt: salt, info: info, outputByteCount: count)
        return key.withUnsafeBytes { Array($0) }
    }

    /// X25519 that rejects an all-zero result (a low-order public key).
    static func agree(_ privateKey: Curve25519.KeyAgreement.PrivateKey, _ publicKey: [UInt8], _ name: String) throws -> [UInt8] {
        guard let peer = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: publicKey),
            let shared = try? privateKey.sharedSecretFromKeyAgreement(with: peer)
        else {
            throw E2EError.invalidKey(name)
        }
        let bytes = shared.withUnsafeBytes { Array($0) }
        guard bytes.contains(where: { $0 != 0 }) else { throw E2EError.invalidKey(name) }
        return bytes
    }

    /// §4: the session secret from the X25519 outputs DH1..DH3 (and DH4 with a one-time prekey,
    /// then the ML-KEM shared secret with a KEM prekey).
    static func sessionSecret(agreements: [[UInt8]], initiator: IdentityKey, responder: IdentityKey) -> [UInt8] {
        let ikm = [UInt8](repeating: 0xFF, count: 32) + agreements.joined()
        let info = sessionStartInfo + initiator.encoded + responder.encoded
        return hkdf(ikm: ikm, salt: [UInt8](repeating: 0, count: 32), info: info, count: 32)
    }

    /// §5: KDF_RK, a DH ratchet step: (new root key, new chain key).
    static func rootStep(rootKey: [UInt8], agreement: [UInt8]) -> (rootKey: [UInt8], chainKey: [UInt8]) {
        let output = hkdf(ikm: agreement, salt: rootKey, info: rootInfo, count: 64)
        return (Array(output[0..<32]), Array(output[32..<64]))
    }

    /// §5: KDF_CK, a symmetric chain step: (next chain key, message key).
    static func chainStep(_ chainKey: [UInt8]) -> (chainKey: [UInt8], messageKey: [UInt8]) {
        let key = SymmetricKey(data: chainKey)
        let messageKey = Array(HMAC<SHA256>.authenticationCode(for: [0x01], using: key))
        let nextChainKey = Array(HMAC<SHA256>.authenticationCode(for: [0x02], using: key))
        return (nextChainKey, messageKey)
    }

    /// §5: the message key alone (KDF_CK's first output).
    static func messageKey(_ chainKey: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: [0x01], using: SymmetricKey(data: chainKey)))
    }

    /// §5: the next chain key alone (KDF_CK's second output), to move a chain ahead.
    static func nextChainKey(_ chainKey: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: [0x02], using: SymmetricKey(data: chainKey)))
    }
}

/// §6: the AEAD, AES-256-GCM with key and nonce expanded from a single-use message key.
enum E2ECipher {
    static let tagSize = 16

    static func seal(_ plaintext: [UInt8], messageKey: [UInt8], info: [UInt8], associatedData: [UInt8]) -> [UInt8] {
        let (key, nonce) = expand(messageKey, info: info)
        // A 32-byte key and a 12-byte nonce cannot make AES-GCM fail.
        let box = try! AES.GCM.seal(plaintext, using: key, nonce: nonce, authenticating: associatedData)
        return Array(box.ciphertext) + Array(box.tag)
    }

    static func open(_ sealed: [UInt8], messageKey: [UInt8], info: [UInt8], associatedData: [UInt8]) throws -> [UInt8] {
        guard sealed.count >= tagSize else { throw E2EError.malformed("ciphertext shorter than the 16-byte tag") }
        let (key, nonce) = expand(messageKey, info: info)
        do {
            let box = try AES.GCM.SealedBox(
                nonce: nonce, ciphertext: sealed.dropLast(tagSize), tag: sealed.suffix(tagSize))
            return Array(try AES.GCM.open(box, using: key, authenticating: associatedData))
        } catch {
            throw E2EError.authenticationFailed
        }
    }

    /// HKDF(salt: 32 zero bytes, ikm: message key, info, 44 bytes) = AES key (32) ‖ nonce (12).
    private static func expand(_ messageKey: [UInt8], info: [UInt8]) -> (SymmetricKey, AES.GCM.Nonce) {
        let output = E2EKDF.hkdf(ikm: messageKey, salt: [UInt8](repeating: 0, count: 32), info: info, count: 44)
        return (SymmetricKey(data: output[0..<32]), try! AES.GCM.Nonce(data: output[32..<44]))
    }
}
