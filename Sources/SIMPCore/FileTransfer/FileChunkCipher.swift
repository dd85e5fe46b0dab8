import Crypto

/// Seals and opens a file's chunks end to end (docs/PROTOCOL.md §5.6, docs/E2E.md §17): AES-256-GCM
/// under a random key made for this one file, which travels only inside the end-to-end message
/// that announces the file. The nonce is the chunk's index, so no nonce repeats under a key (a
/// chunk sent again is sealed to the same bytes); the associated data binds the file id, so a
/// chunk cannot be moved to another transfer or another position.
///
/// The key schedule is built once per file (`AEADKey`), and each chunk is sealed or opened
/// straight into its result, with the nonce and associated data on the stack: no `Data`,
/// sealed box or temporary array per chunk.
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
    /// What the associated data starts with.
    private static let label = Array("simp file v1".utf8)
    /// Bytes of the nonce (12) and of the associated data (label, file id, index: 28), laid
    /// out one after the other.
    private static let nonceAndAssociatedSize = AEADKey.nonceSize + 12 + 16

    private let key: AEADKey
    private let fileId: UInt64

    /// A cipher for file `fileId` under `key` (32 bytes).
    public init(key: [UInt8], fileId: UInt64) {
        precondition(key.count == Self.keySize, "a file key is \(Self.keySize) bytes")
        self.key = AEADKey(SymmetricKey(data: key))
        self.fileId = fileId
    }

    /// A fresh random key for a new file.
    public static func newKey<Random: RandomNumberGenerator>(using random: inout Random) -> [UInt8] {
        (0..<keySize).map { _ in UInt8.random(in: .min ... .max, using: &random) }
    }

    /// Chunk `index`'s plaintext sealed: ciphertext ‖ tag.
    public func seal(_ plaintext: [UInt8], index: UInt64) -> [UInt8] {
        plaintext.withUnsafeBytes { seal($0, index: index) }
    }

    /// Chunk `index`'s plaintext, read where it lies (a slice of the sender's read window),
    /// sealed: ciphertext ‖ tag.
    public func seal(_ plaintext: UnsafeRawBufferPointer, index: UInt64) -> [UInt8] {
        let count = plaintext.count + Self.overhead
        return [UInt8](unsafeUninitializedCapacity: count) { out, initialized in
            let out = UnsafeMutableRawPointer(out.baseAddress!)
            // An empty plaintext is read from `out` itself (sealing in place is allowed).
            let plaintext = plaintext.baseAddress == nil ? UnsafeRawBufferPointer(start: out, count: 0) : plaintext
            withNonceAndAssociatedData(index) { nonce, associated in key.seal(plaintext, into: out, nonce: nonce, associated: associated) }
            initialized = count
        }
    }

    /// Chunk `index`'s plaintext from its sealed form.
    public func open(_ sealed: [UInt8], index: UInt64) throws -> [UInt8] {
        guard sealed.count >= Self.overhead else { throw OpenError.notAuthentic }
        var authentic = false
        // At least one byte, so that an empty chunk's plaintext has an address to go to.
        let plaintext = [UInt8](unsafeUninitializedCapacity: max(1, sealed.count - Self.overhead)) { out, initialized in
            let opened = sealed.withUnsafeBytes { sealed in
                withNonceAndAssociatedData(index) { nonce, associated in
                    key.open(sealed, into: UnsafeMutableRawPointer(out.baseAddress!), nonce: nonce, associated: associated)
                }
            }
            authentic = opened != nil
            initialized = opened ?? 0
        }
        guard authentic else { throw OpenError.notAuthentic }
        return plaintext
    }

    /// Calls `body` with chunk `index`'s nonce, `00 00 00 00 ‖ index`, and its associated data,
    /// `"simp file v1" ‖ fileId ‖ index` (numbers 8 bytes, big-endian), built on the stack.
    private func withNonceAndAssociatedData<Result>(
        _ index: UInt64, _ body: (_ nonce: UnsafeRawBufferPointer, _ associated: UnsafeRawBufferPointer) -> Result
    ) -> Result {
        withUnsafeTemporaryAllocation(byteCount: Self.nonceAndAssociatedSize, alignment: 8) { raw in
            raw.storeBytes(of: 0 as UInt32, toByteOffset: 0, as: UInt32.self)
            raw.storeBytes(of: index.bigEndian, toByteOffset: 4, as: UInt64.self)
            let associated = AEADKey.nonceSize
            Self.label.withUnsafeBytes { raw.baseAddress!.advanced(by: associated).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            raw.storeBytes(of: fileId.bigEndian, toByteOffset: associated + 12, as: UInt64.self)
            raw.storeBytes(of: index.bigEndian, toByteOffset: associated + 20, as: UInt64.self)
            return body(
                UnsafeRawBufferPointer(start: raw.baseAddress!, count: associated),
                UnsafeRawBufferPointer(start: raw.baseAddress! + associated, count: Self.nonceAndAssociatedSize - associated))
        }
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
