/// "I could not decrypt your message X: send it again" (docs/E2E.md §7.5), the plaintext of a
/// pairwise message: `0x01 ‖ 0x06 ‖ u64(SIMP messageId of the message)`.
public struct ResendRequest: Equatable, Sendable {
    /// The `messageId` (PROTOCOL.md §2.2) of the message that could not be decrypted.
    public let messageId: UInt64

    public init(messageId: UInt64) { self.messageId = messageId }

    public var encoded: [UInt8] {
        var writer = ByteWriter()
        writer.u8(1)
        writer.u8(E2EMessageType.resendRequest.rawValue)
        writer.u64(messageId)
        return writer.bytes
    }

    public init(encoded: [UInt8]) throws {
        var reader = ByteReader(encoded, reading: "resend request")
        try reader.expectVersion(1)
        guard try reader.u8() == E2EMessageType.resendRequest.rawValue else { throw E2EError.malformed("resend request: type is not 6") }
        messageId = try reader.u64()
        try reader.expectEnd()
    }

    /// Whether a decrypted pairwise plaintext is a resend request (it starts `0x01 0x06`, which
    /// no protobuf `Message` does) rather than a message.
    public static func isResendRequest(_ plaintext: [UInt8]) -> Bool {
        plaintext.count >= 2 && plaintext[0] == 1 && plaintext[1] == E2EMessageType.resendRequest.rawValue
    }
}

/// Recovery from a session that cannot decrypt (docs/E2E.md §7.5): the receiver of a message
/// it cannot decrypt asks the sending device, on a new session, to send it again; the sender
/// sends that message again to that device only.
extension E2EMessenger {
    /// Whether an error from `open` means the two devices' sessions no longer agree (a device
    /// restored from a backup reuses message keys, or its peer's ratchet moved on past it), so
    /// that asking for the message again on a new session can recover it. Malformed input and
    /// a format this code does not speak cannot be recovered that way.
    public static func isRecoverable(_ error: Error) -> Bool {
        switch error as? E2EError {
        case .duplicate?, .authenticationFailed?, .noSession?, .unknownPrekey?, .tooManySkipped?: true
        default: false
        }
    }

    /// A resend request for `messageId` sealed for `peer`'s device `device` only, in an
    /// envelope (docs/E2E.md §13). With `bundle` (that device's bundle as the relay hands it out) a new
    /// session is started first, so the request does not depend on the session that failed;
    /// without it the request goes on the current session.
    public mutating func sealResendRequest(
        for messageId: UInt64, to peer: String, device: String, newSessionFrom bundle: KeyBundle?,
        using random: inout some RandomNumberGenerator
    ) throws -> [UInt8] {
        if let bundle {
            try bundle.verify()
            try local.startSession(with: Self.sessionName(peer, device), bundle: bundle, using: &random)
        }
        return try seal(ResendRequest(messageId: messageId).encoded, to: peer, device: device)
    }

    /// The devices of `peer` whose sessions here are a restored copy (`E2EDevice.sessionIsCopy`):
    /// each needs `startRecoverySession` before anything is sealed for `peer`.
    public func devicesWithCopiedSessions(of peer: String) throws -> [String] {
        try devices(of: peer).map(\.device).filter { try local.sessionIsCopy(with: Self.sessionName(peer, $0)) }
    }

    /// Starts a new session with `peer`'s device `device` from its bundle, flagged as a recovery
    /// (§7.3): this device's earlier session with it is a copy.
    public mutating func startRecoverySession(
        with peer: String, device: String, bundle: KeyBundle, using random: inout some RandomNumberGenerator
    ) throws {
        try bundle.verify()
        try local.startSession(with: Self.sessionName(peer, device), bundle: bundle, isRecovery: true, using: &random)
    }

    /// Encrypts `plaintext` for `peer`'s device `device` only (a message sent again to the
    /// device that asked for it: the others had it).
    public mutating func seal(_ plaintext: [UInt8], to peer: String, device: String) throws -> [UInt8] {
        let copy = try local.encrypt(plaintext, to: Self.sessionName(peer, device))
        return E2EEnvelope(senderDevice: self.device, copies: [(device, copy)]).encoded
    }
}

/// The SIMP message ids last decrypted from each peer device (docs/E2E.md §7.5), so that a
/// message decrypted before and delivered again under the same id (its receipt was lost and
/// this device restarted, so the transport's dedupe forgot it) is told from a new message whose
/// key was already used (a restored sender): only the latter is asked for again.
extension E2EMessenger {
    /// How many ids are kept per peer device.
    public static let decryptedIdsKept = 128
    /// How many of the newest of them keep their plaintext (docs/E2E.md §15): a copy delivered
    /// again comes from the last read burst before a crash, whose receipts had not left.
    public static let plaintextsKept = 32

    /// Records that the message `messageId` from `peer`'s device `device` was decrypted, with
    /// its plaintext (kept so that a copy delivered again is handed over as it was, `receive`).
    /// One small entry per message (its slot, `messageId` mod `decryptedIdsKept`), and the
    /// plaintext of the slot `plaintextsKept` before it dropped: nothing is re-encoded per message.
    public func noteDecrypted(_ messageId: UInt64, from peer: String, device: String, plaintext: [UInt8]? = nil) throws {
        try migrateDecryptedList(from: peer, device: device)
        guard try slot(of: messageId, from: peer, device: device)?.id != messageId else { return }
        try saveSlot((messageId, plaintext), from: peer, device: device)
        let older = messageId &- UInt64(Self.plaintextsKept)
        if let entry = try slot(of: older, from: peer, device: device), entry.plaintext != nil {
            try saveSlot((entry.id, nil), from: peer, device: device)
        }
    }

    /// Whether the message `messageId` from `peer`'s device `device` was decrypted here before.
    public func hasDecrypted(_ messageId: UInt64, from peer: String, device: String) throws -> Bool {
        try decrypted(messageId, from: peer, device: device) != nil
    }

    /// The length that says an entry has no plaintext.
    private static let noPlaintext = UInt32.max

    /// Message `messageId` from `peer`'s `device` as it was noted decrypted, with its plaintext
    /// if kept; nil if it was not (or no longer is among the last `decryptedIdsKept`).
    func decrypted(_ messageId: UInt64, from peer: String, device: String) throws -> (id: UInt64, plaintext: [UInt8]?)? {
        try migrateDecryptedList(from: peer, device: device)
        return try slot(of: messageId, from: peer, device: device).flatMap { $0.id == messageId ? $0 : nil }
    }

    /// The entry in the slot of `messageId`: `decrypted/<peer>/<device>/<messageId mod 128>`,
    /// version 3: `0x03 ‖ u64 id ‖ u32 length ‖ plaintext` (length `0xFFFFFFFF` and no bytes
    /// for an id kept without its plaintext).
    private func slot(of messageId: UInt64, from peer: String, device: String) throws -> (id: UInt64, plaintext: [UInt8]?)? {
        guard let bytes = try store.load(Self.slotName(messageId, peer, device)), !bytes.isEmpty else { return nil }
        var reader = ByteReader(bytes, reading: "decrypted id")
        try reader.expectVersion(3)
        let id = try reader.u64(), length = try reader.u32()
        let plaintext = length == Self.noPlaintext ? nil : try reader.raw(Int(length))
        try reader.expectEnd()
        return (id, plaintext)
    }

    private func saveSlot(_ entry: (id: UInt64, plaintext: [UInt8]?), from peer: String, device: String) throws {
        var writer = ByteWriter()
        writer.u8(3)
        writer.u64(entry.id)
        writer.u32(entry.plaintext.map { UInt32($0.count) } ?? Self.noPlaintext)
        writer.raw(entry.plaintext ?? [])
        try store.save(Self.slotName(entry.id, peer, device), SecretBytes(writer.bytes))
    }

    private static func slotName(_ messageId: UInt64, _ peer: String, _ device: String) -> String {
        decryptedName(peer, device) + "/\(messageId % UInt64(decryptedIdsKept))"
    }

    /// Moves a list an earlier version kept (`decrypted/<peer>/<device>`, version 2 `0x02 ‖ u16 n
    /// ‖ n × (u64 id ‖ u32 length ‖ plaintext)`, version 1 `0x01 ‖ u16 n ‖ n × u64 id`) into
    /// slots, once, and leaves it empty.
    private func migrateDecryptedList(from peer: String, device: String) throws {
        guard let bytes = try store.load(Self.decryptedName(peer, device)), !bytes.isEmpty else { return }
        var reader = ByteReader(bytes, reading: "decrypted ids")
        let version = try reader.u8()
        guard version == 1 || version == 2 else { throw E2EError.unsupportedVersion(version) }
        let entries = try (0..<(try reader.u16())).map { _ -> (id: UInt64, plaintext: [UInt8]?) in
            let id = try reader.u64()
            guard version == 2 else { return (id, nil) }
            let length = try reader.u32()
            return (id, length == Self.noPlaintext ? nil : try reader.raw(Int(length)))
        }
        try reader.expectEnd()
        for entry in entries { try saveSlot(entry, from: peer, device: device) }
        try store.save(Self.decryptedName(peer, device), SecretBytes([]))
    }

    private static func decryptedName(_ peer: String, _ device: String) -> String { "decrypted/" + sessionName(peer, device) }
}
