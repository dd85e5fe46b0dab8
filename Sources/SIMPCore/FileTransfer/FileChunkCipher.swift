import Crypto

/// Seals and opens a file's chunks end to end (docs/PROTOCOL.md §5.6, docs/E2E.md §17): AES-256-GCM
/// under a random key made for this one file, which travels only inside the end-to-end message
/// that announces the file. The nonce is the chunk's index, so no nonce repeats under a key (a
/// chunk sent again is sealed to the same bytes); the associated data binds the file id, so a
/// chunk cannot be moved to another transfer or another position.
public struct FileChunkCipher: Sendable {
    /// Why a chunk did not open.
    public enum OpenError: Error, Equatable, Sendable {
        /// The tag did not verify: the chunk was altered, or belongs to another file or position.
        case notAuthentic
    }

    /// Bytes the seal adds to a chunk (the GCM tag).
    public static let overhead = 16
    /// The key's length in bytes.
    public static let keySize = 32

    private let key: SymmetricKey
    private let fileId: UInt64

    /// A cipher for file `fileId` under `key` (32 bytes).
    public init(key: [UInt8], fileId: UInt64) {
        precondition(key.count == Self.keySize, "a file key is \(Self.keySize) bytes")
        self.key = SymmetricKey(data: key)
        self.fileId = fileId
    }

    /// A fresh random key for a new file.
    public static func newKey<Random: RandomNumberGenerator>(using random: inout Random) -> [UInt8] {
        (0..<keySize).map { _ in UInt8.random(in: .min ... .max, using: &random) }
    }

    /// Chunk `index`'s plaintext sealed: ciphertext ‖ tag.
    public func seal(_ plaintext: [UInt8], index: UInt64) -> [UInt8] {
        // A 12-byte nonce from an index cannot fail; the precondition documents it.
        guard let box = try? AES.GCM.seal(plaintext, using: key, nonce: Self.nonce(index), authenticating: associatedData(index)) else {
            preconditionFailure("AES-GCM refused a 12-byte nonce")
        }
        return Array(box.ciphertext) + Array(box.tag)
    }

    /// Chunk `index`'s plaintext from its sealed form.
    public func open(_ sealed: [UInt8], index: UInt64) throws -> [UInt8] {
        guard sealed.count >= Self.overhead else { throw OpenError.notAuthentic }
        do {
            let box = try AES.GCM.SealedBox(
                nonce: Self.nonce(index), ciphertext: sealed.dropLast(Self.overhead), tag: sealed.suffix(Self.overhead))
            return Array(try AES.GCM.open(box, using: key, authenticating: associatedData(index)))
        } catch {
            throw OpenError.notAuthentic
        }
    }

    /// `00 00 00 00 ‖ index` (8 bytes, big-endian).
    static func nonce(_ index: UInt64) -> AES.GCM.Nonce {
        // A 12-byte nonce is always valid.
        try! AES.GCM.Nonce(data: [0, 0, 0, 0] + bigEndian(index))
    }

    /// `"simp file v1" ‖ fileId ‖ index` (each 8 bytes, big-endian).
    private func associatedData(_ index: UInt64) -> [UInt8] {
        Array("simp file v1".utf8) + Self.bigEndian(fileId) + Self.bigEndian(index)
    }

    private static func bigEndian(_ value: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: value >> (56 - 8 * $0)) }
    }
}

/// SHA-256 of a file's plaintext, fed in pieces: the digest an announcement carries and a
/// receiver checks before it shows the file.
public struct FileDigest: Sendable {
    private var hasher = SHA256()

    public init() {}

    /// The digest of `bytes` at once.
    public static func of(_ bytes: [UInt8]) -> [UInt8] {
        var digest = FileDigest()
        digest.update(bytes)
        return digest.finalize()
    }

    /// Adds the next bytes.
    public mutating func update(_ bytes: [UInt8]) { hasher.update(data: bytes) }

    /// The digest of everything added (32 bytes).
    public func finalize() -> [UInt8] { Array(hasher.finalize()) }
}
