/// Who may ask for a direct message again (docs/E2E.md §7.5): the devices it was encrypted for
/// when it was sent, each with the identity key it had then. A device added later (by its user,
/// or by a relay that made one up) or one whose identity changed since gets nothing old.
public struct ResendRecipients: Equatable, Sendable {
    /// Device → identity key (64 bytes) at the time the message was sealed.
    public let identities: [String: [UInt8]]

    /// The devices that had a copy of the message (`copies`: the envelope's device names),
    /// with the identities this device knew for them then (`known`).
    public init(copies: [String], known: [(device: String, identity: IdentityKey)]) {
        var identities: [String: [UInt8]] = [:]
        for (device, identity) in known where copies.contains(device) { identities[device] = identity.encoded }
        self.identities = identities
    }

    /// Whether `device`, whose identity is `identity` now, had a copy of the message with that
    /// identity: only then is the message sent to it again.
    public func allows(device: String, identity: IdentityKey?) -> Bool {
        guard let identity, let then = identities[device] else { return false }
        return then == identity.encoded
    }
}
