import Crypto

/// Safety numbers (docs/E2E.md §10): 60 digits both devices compute alike from the two user
/// names and identity keys, compared out of band to detect a key substituted by the relay.
public enum SafetyNumber {
    /// The 60 digits in twelve groups of five separated by spaces: the two 30-digit halves of
    /// `fingerprint`, the smaller first, so the order of the arguments does not matter.
    public static func compute(
        localUser: String, localIdentity: IdentityKey,
        remoteUser: String, remoteIdentity: IdentityKey
    ) -> String {
        let halves = [
            fingerprint(user: localUser, identity: localIdentity),
            fingerprint(user: remoteUser, identity: remoteIdentity),
        ].sorted()
        let digits = Array(halves.joined())
        return stride(from: 0, to: digits.count, by: 5).map { String(digits[$0..<$0 + 5]) }.joined(separator: " ")
    }

    /// 30 digits for one side: SHA-512("SIMP-E2E v1 safety number" ‖ u16 length ‖ user ‖
    /// identity (64)); each of the first six 5-byte groups, big-endian, modulo 100,000.
    public static func fingerprint(user: String, identity: IdentityKey) -> String {
        var writer = ByteWriter()
        writer.raw(Array("SIMP-E2E v1 safety number".utf8))
        writer.lengthPrefixed(Array(user.utf8))
        writer.raw(identity.encoded)
        let digest = Array(SHA512.hash(data: writer.bytes))
        return (0..<6).map { group in
            let value = digest[group * 5..<group * 5 + 5].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let text = String(value % 100_000)
            return String(repeating: "0", count: 5 - text.count) + text
        }.joined()
    }
}
