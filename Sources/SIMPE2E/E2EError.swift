/// Why an end-to-end operation failed. Messages name the field or limit, never key material.
public enum E2EError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The bytes do not follow docs/E2E.md (short, long, bad type or length).
    case malformed(String)
    /// The first byte names a format version this code does not speak.
    case unsupportedVersion(UInt8)
    /// A key bundle's signed prekey is not signed by the bundle's identity signing key.
    case badPrekeySignature
    /// A prekey message names a signed or one-time prekey this device no longer has.
    case unknownPrekey(String)
    /// A public key is not usable (for example an X25519 key whose shared secret is all zeros).
    case invalidKey(String)
    /// The message key for this header was already used: a duplicate (retransmission) of a
    /// message that was decrypted before, or one whose skipped key was forgotten (age or cap).
    case duplicate
    /// Decrypting would skip more message keys than the limit allows; the session is unchanged.
    case tooManySkipped(requested: UInt32, limit: UInt32)
    /// The AEAD tag or the room signature did not verify; the session is unchanged.
    case authenticationFailed
    /// No session or sender key to decrypt or encrypt with.
    case noSession(String)

    public var description: String {
        switch self {
        case .malformed(let detail): return "malformed end-to-end data: \(detail)"
        case .unsupportedVersion(let version): return "unsupported end-to-end format version \(version)"
        case .badPrekeySignature: return "the signed prekey's signature does not verify with the identity key"
        case .unknownPrekey(let which): return "unknown prekey: \(which)"
        case .invalidKey(let which): return "invalid public key: \(which)"
        case .duplicate: return "message key already used (duplicate or forgotten)"
        case .tooManySkipped(let requested, let limit): return "would skip \(requested) message keys, limit \(limit)"
        case .authenticationFailed: return "authentication failed (wrong key or altered message)"
        case .noSession(let detail): return "no session: \(detail)"
        }
    }
}
