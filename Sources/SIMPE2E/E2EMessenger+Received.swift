/// A direct message received once and delivered again (docs/E2E.md §15): its plaintext is kept
/// with its id in the same store commit as the ratchet step that decrypted it, so a copy
/// the relay delivers again after this device restarted (its receipt never left) is handed
/// over from what was kept, never dropped as a duplicate of a key already used.
public struct Received: Equatable, Sendable {
    /// The pairwise plaintext.
    public let plaintext: [UInt8]
    /// What to tell the user (nothing for a copy received before).
    public let notices: [E2ENotice]
    /// Whether it was opened before (by this process or an earlier one of this device): the
    /// plaintext is the one kept then, and nothing was decrypted now.
    public let openedBefore: Bool

    public init(plaintext: [UInt8], notices: [E2ENotice], openedBefore: Bool) {
        (self.plaintext, self.notices, self.openedBefore) = (plaintext, notices, openedBefore)
    }
}

extension E2EMessenger {
    /// Opens message `messageId` from `peer` (this device's copy in `envelope`): the plaintext
    /// kept when it was first opened, or decrypted now and kept, with its id, among the last
    /// `decryptedIdsKept` from that device, saved with the ratchet step (one commit).
    /// - Throws: as `open`.
    public mutating func receive(
        _ envelope: [UInt8], messageId: UInt64, from peer: String, now: UInt64, using random: inout some RandomNumberGenerator
    ) throws -> Received {
        let decoded = try E2EEnvelope(encoded: envelope)
        let sender = decoded.senderDevice
        if let kept = try keptPlaintext(of: messageId, from: peer, device: sender) {
            return Received(plaintext: kept, notices: [], openedBefore: true)
        }
        let opened = try open(decoded, from: peer, now: now, using: &random)
        try noteDecrypted(messageId, from: peer, device: sender, plaintext: opened.plaintext)
        return Received(plaintext: opened.plaintext, notices: opened.notices, openedBefore: false)
    }

    /// The plaintext kept for message `messageId` from `peer`'s `device` when it was opened
    /// (`noteDecrypted`), or nil. For room posts `peer` is `#<room>` and `device` the author.
    public func keptPlaintext(of messageId: UInt64, from peer: String, device: String) throws -> [UInt8]? {
        try decrypted(messageId, from: peer, device: device)?.plaintext
    }
}
