/// The identity keys of a peer's devices as the user verified them (docs/E2E.md §10), and what
/// that means for sending now: a verified peer whose device is new or has another key since is
/// not sent to until the user accepts the change (`VerificationCheck.changed`).
public struct VerifiedIdentities: Equatable, Sendable {
    /// Device name → identity key (64 bytes: agreement ‖ signing) when verified.
    public private(set) var identities: [String: [UInt8]]
    /// The peer's user key pinned when verified (docs/E2E.md §3.4; nil: none was pinned).
    public private(set) var userKey: [UInt8]?

    /// The line name the user key is kept under (no device name starts with `@`).
    static let userKeyLine = "@user-key"

    /// The devices `devices` (name, identity) as verified now, with the user key pinned then.
    public init(_ devices: [(device: String, identity: IdentityKey)], userKey: [UInt8]? = nil) {
        identities = Dictionary(devices.map { ($0.device, $0.identity.encoded) }) { $1 }
        self.userKey = userKey
    }

    /// Decodes the kept form: one line per device, `NAME HEX` (the identity in lowercase hex),
    /// sorted by name. Lines that do not parse are skipped.
    public init(encoded: [UInt8]) {
        var identities: [String: [UInt8]] = [:]
        for line in String(decoding: encoded, as: UTF8.self).split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 2, let key = Self.bytes(hex: parts[1]) else { continue }
            identities[String(parts[0])] = key
        }
        userKey = identities.removeValue(forKey: Self.userKeyLine)
        self.identities = identities
    }

    /// The kept form (see `init(encoded:)`).
    public var encoded: [UInt8] {
        var identities = identities
        if let userKey { identities[Self.userKeyLine] = userKey }
        let lines = identities.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value.map { String(format2: $0) }.joined())" }
        return Array(lines.joined(separator: "\n").utf8)
    }

    /// Whether `device` was verified with `identity`.
    public func isVerified(device: String, identity: IdentityKey) -> Bool { identities[device] == identity.encoded }

    /// How the peer's devices known now (`devices`: those messages go to) and its user key
    /// pinned now (`userKey`) compare with what was verified: a user key pinned at verification
    /// that is another now, or gone, is a change (named "user key").
    public func check(_ devices: [(device: String, identity: IdentityKey)], userKey: [UInt8]? = nil) -> VerificationCheck {
        var changed = devices.filter { !isVerified(device: $0.device, identity: $0.identity) }.map(\.device).sorted()
        if let verifiedKey = self.userKey, verifiedKey != userKey { changed.insert("user key", at: 0) }
        return changed.isEmpty ? .verified : .changed(devices: changed)
    }

    private static func bytes(hex: Substring) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count.isMultiple(of: 2) else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
        }
        return bytes
    }
}

/// What the user's verification of a peer says about sending to it now.
public enum VerificationCheck: Equatable, Sendable {
    /// Every device known now is one the user verified, with the key it had then.
    case verified
    /// These devices are new or have another key than when the user verified the peer:
    /// nothing is sent to the peer until the user accepts the change or verifies again.
    case changed(devices: [String])
}
