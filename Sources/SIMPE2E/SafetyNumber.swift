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

    /// A device's code (docs/E2E.md §3.4): the first three groups of its fingerprint, e.g.
    /// `04217 93381 20654`. A new device shows it; the device approving it computes it from the
    /// keys the relay serves under its name, and the user compares the two, so a relay that
    /// serves other keys under that name is caught before they are approved.
    public static func deviceCode(user: String, identity: IdentityKey) -> String {
        let digits = Array(fingerprint(user: user, identity: identity).prefix(15))
        return stride(from: 0, to: digits.count, by: 5).map { String(digits[$0..<$0 + 5]) }.joined(separator: " ")
    }

    /// Whether `typed` is the device code `code`, whatever spaces or dashes separate its digits.
    public static func deviceCode(_ code: String, matches typed: String) -> Bool {
        let digits = typed.filter { $0 != " " && $0 != "-" }
        return !digits.isEmpty && digits == code.filter { $0 != " " }
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
