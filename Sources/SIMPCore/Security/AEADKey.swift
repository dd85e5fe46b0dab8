// swift-crypto's BoringSSL: not a product of its own, but a module of the `Crypto` product's
// target, which SwiftPM makes importable here; `internal` keeps it out of SIMPCore's interface.
internal import CCryptoBoringSSL
import Crypto

/// One direction's AES-256-GCM key with its key schedule built once: a BoringSSL `EVP_AEAD_CTX`
/// that every datagram of the session reuses. Seals and opens in place, in the caller's memory,
/// without `Data`, arrays or sealed-box temporaries (swift-crypto's one-shot `AES.GCM` API
/// builds a context and three `Data` values per call).
///
/// Sendable: the context is written only by `init` and `deinit`; BoringSSL's seal and open take
/// it as `const` and keep no per-call state in it, so threads may share one.
final class AEADKey: @unchecked Sendable {
    /// Bytes of a GCM tag.
    static let tagSize = 16
    /// Bytes of a GCM nonce.
    static let nonceSize = 12

    private let context: UnsafeMutablePointer<EVP_AEAD_CTX>

    /// Expands `key` (32 bytes) for AES-256-GCM with 16-byte tags.
    init(_ key: SymmetricKey) {
        precondition(key.bitCount == 256, "AES-256-GCM takes a 256-bit key")
        context = key.withUnsafeBytes { bytes in
            // Fails only for a wrong key size or an out-of-memory, neither recoverable here.
            CCryptoBoringSSL_EVP_AEAD_CTX_new(
                CCryptoBoringSSL_EVP_aead_aes_256_gcm(), bytes.baseAddress?.assumingMemoryBound(to: UInt8.self),
                bytes.count, AEADKey.tagSize)!
        }
    }

    deinit { CCryptoBoringSSL_EVP_AEAD_CTX_free(context) }

    /// Encrypts `plaintext` into `out` and writes the tag right after the ciphertext, so `out`
    /// needs room for `plaintext.count + tagSize` bytes; `out` may be `plaintext`'s own address
    /// (in place) but must not overlap it otherwise. `nonce` is 12 bytes; `associated` is
    /// authenticated, not encrypted.
    func seal(
        _ plaintext: UnsafeRawBufferPointer, into out: UnsafeMutableRawPointer,
        nonce: UnsafeRawBufferPointer, associated: UnsafeRawBufferPointer
    ) {
        var written = 0
        let sealed = CCryptoBoringSSL_EVP_AEAD_CTX_seal(
            context, out.assumingMemoryBound(to: UInt8.self), &written, plaintext.count + AEADKey.tagSize,
            bytes(nonce), nonce.count, bytes(plaintext), plaintext.count, bytes(associated), associated.count)
        // Sealing fails only for wrong sizes, all fixed by the caller's layout.
        precondition(sealed == 1 && written == plaintext.count + AEADKey.tagSize, "AES-GCM seal failed")
    }

    /// Checks the tag of `sealed` (ciphertext, then the 16-byte tag) and decrypts the ciphertext
    /// into `out` (room for `sealed.count - tagSize` bytes; `out` may be `sealed`'s own address,
    /// but must not overlap it otherwise). Returns the plaintext's length, or nil if the tag does
    /// not match, in which case the bytes at `out` are unspecified.
    func open(
        _ sealed: UnsafeRawBufferPointer, into out: UnsafeMutableRawPointer,
        nonce: UnsafeRawBufferPointer, associated: UnsafeRawBufferPointer
    ) -> Int? {
        guard sealed.count >= AEADKey.tagSize else { return nil }
        var written = 0
        let opened = CCryptoBoringSSL_EVP_AEAD_CTX_open(
            context, out.assumingMemoryBound(to: UInt8.self), &written, sealed.count - AEADKey.tagSize,
            bytes(nonce), nonce.count, bytes(sealed), sealed.count, bytes(associated), associated.count)
        guard opened == 1 else {
            // A failed open leaves an error on BoringSSL's per-thread queue; drop it.
            CCryptoBoringSSL_ERR_clear_error()
            return nil
        }
        return written
    }

    private func bytes(_ buffer: UnsafeRawBufferPointer) -> UnsafePointer<UInt8>? {
        buffer.baseAddress?.assumingMemoryBound(to: UInt8.self)
    }
}

/// A direction's key whose AES-GCM context (`AEADKey`, about 600 bytes of key schedule) is
/// built on first use: an idle session, which never seals or opens a datagram, keeps only the
/// 32-byte key. Built in place by the mutating owner (a sealer or opener kept in its table).
/// One pointer wide either way, so a session's table entry does not grow.
enum LazyAEADKey: Sendable {
    case secret(SymmetricKey)
    case built(AEADKey)

    init(_ secret: SymmetricKey) { self = .secret(secret) }

    /// The context, built now if this is its first use.
    mutating func key() -> AEADKey {
        switch self {
        case .built(let key): return key
        case .secret(let secret):
            let key = AEADKey(secret)
            self = .built(key)
            return key
        }
    }
}
