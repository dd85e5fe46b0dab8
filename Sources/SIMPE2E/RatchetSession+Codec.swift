import Crypto

/// The persistent form of a session (docs/E2E.md §9). Secret: it holds the chain keys.
/// Version 2 keeps the sending ratchet's public key after its private key; version 1 (which
/// did not) is still read, deriving it.
extension RatchetSession {
    private static let version: UInt8 = 2
    private enum Flag {
        static let initiator: UInt8 = 0x01
        static let receivingRatchetKey: UInt8 = 0x02
        static let sendingChain: UInt8 = 0x04
        static let receivingChain: UInt8 = 0x08
        static let pendingStart: UInt8 = 0x10
    }

    public var secretBytes: SecretBytes {
        var writer = ByteWriter()
        writer.u8(Self.version)
        var flags: UInt8 = isInitiator ? Flag.initiator : 0
        if receivingRatchetKey != nil { flags |= Flag.receivingRatchetKey }
        if sendingChain != nil { flags |= Flag.sendingChain }
        if receivingChain != nil { flags |= Flag.receivingChain }
        if pendingStart != nil { flags |= Flag.pendingStart }
        writer.u8(flags)
        writer.raw(localIdentity.encoded)
        writer.raw(remoteIdentity.encoded)
        writer.raw(baseKey)
        writer.raw(rootKey.bytes)
        writer.raw(sendingRatchetKey.privateKey.bytes)
        writer.raw(sendingRatchetKey.publicKey)
        if let receivingRatchetKey { writer.raw(receivingRatchetKey) }
        if let sendingChain { writer.raw(sendingChain.bytes) }
        writer.u32(sendingCount)
        writer.u32(previousSendingCount)
        if let receivingChain { writer.raw(receivingChain.bytes) }
        writer.u32(receivingCount)
        pendingStart?.write(to: &writer)
        writer.u16(UInt16(retiredReceivingKeys.count))
        for key in retiredReceivingKeys { writer.raw(key) }
        skipped.write(to: &writer)
        return SecretBytes(writer.bytes)
    }

    public init(secretBytes: [UInt8]) throws {
        var reader = ByteReader(secretBytes, reading: "session state")
        let version = try reader.u8()
        guard version == 1 || version == Self.version else { throw E2EError.unsupportedVersion(version) }
        let flags = try reader.u8()
        func has(_ flag: UInt8) -> Bool { flags & flag != 0 }
        localIdentity = try IdentityKey(reading: &reader)
        remoteIdentity = try IdentityKey(reading: &reader)
        isInitiator = has(Flag.initiator)
        baseKey = try reader.key()
        rootKey = SecretBytes(try reader.key())
        let sendingPrivateKey = try reader.key()
        sendingRatchetKey =
            version == 1
            ? SendingRatchetKey(try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: sendingPrivateKey))
            : SendingRatchetKey(privateKey: SecretBytes(sendingPrivateKey), publicKey: try reader.key())
        receivingRatchetKey = has(Flag.receivingRatchetKey) ? try reader.key() : nil
        sendingChain = has(Flag.sendingChain) ? SecretBytes(try reader.key()) : nil
        sendingCount = try reader.u32()
        previousSendingCount = try reader.u32()
        receivingChain = has(Flag.receivingChain) ? SecretBytes(try reader.key()) : nil
        receivingCount = try reader.u32()
        pendingStart = has(Flag.pendingStart) ? try SessionStartFields(reading: &reader) : nil
        retiredReceivingKeys = try (0..<(try reader.u16())).map { _ in try reader.key() }
        skipped = try SkippedMessageKeys(reading: &reader)
        try reader.expectEnd()
    }
}

/// Message keys reserved ahead on the sending chain (docs/E2E.md §15): the stored copy of a
/// session holds its sending chain `count` steps along (`chain`), so the keys before that may
/// be used without writing the session again, and a device that restarts from the stored copy
/// starts after them: it never seals again with a key it used. The receiver keeps the keys a
/// restart skipped (§5.3).
struct SendingReservation: Sendable {
    /// The sending ratchet key of the chain reserved on (a DH ratchet step starts another).
    let ratchetKey: [UInt8]
    /// The sending count the stored copy is at: keys below it may be used.
    let count: UInt32
    /// The sending chain key at `count`.
    let chain: SecretBytes
    /// How many keys this reservation covers, the one just used included (the next one on the
    /// chain covers twice as many).
    let size: UInt32
    /// The chain keys after the one in use when it was made (`count - size + 1` on), up to
    /// `chain`: computed to reserve, used again to encrypt (`chainKey(after:)`).
    let chainKeys: [SecretBytes]

    /// The chain key that follows `session`'s current one, when this reservation computed it.
    func chainKey(after session: RatchetSession) -> [UInt8]? {
        guard ratchetKey == session.sendingRatchetKey.publicKey, session.sendingCount < count else { return nil }
        let index = Int(session.sendingCount) - (Int(count) - chainKeys.count)
        return chainKeys.indices.contains(index) ? chainKeys[index].bytes : nil
    }

    /// Whether this reservation is of `session`'s sending chain and covers the key it uses next.
    func covers(_ session: RatchetSession) -> Bool {
        session.sendingChain != nil && ratchetKey == session.sendingRatchetKey.publicKey && count > session.sendingCount
    }
}

extension RatchetSession {
    /// The most message keys one reservation covers: once a chain has sent this many, the
    /// session is written once per this many messages; a crash skips fewer than this many keys.
    static let keysReservedAhead: UInt32 = 64

    /// A reservation of the sending chain's next `size - 1` message keys (nil without a
    /// sending chain), made when a message was just encrypted with the last key covered: `size`
    /// is 1 on a chain not reserved on before, so a chain that sends once or twice (a
    /// conversation taking turns, one `simp send`) is stored as it is, exactly as without
    /// reservations; then twice the `previous` reservation's on the same chain, up to
    /// `keysReservedAhead`.
    func reserveSendingKeys(after previous: SendingReservation?) -> SendingReservation? {
        guard var chain = sendingChain?.bytes else { return nil }
        let sameChain = previous?.ratchetKey == sendingRatchetKey.publicKey
        let size = sameChain ? min(2 * (previous?.size ?? 1), Self.keysReservedAhead) : 1
        var chainKeys: [SecretBytes] = []
        for _ in 1..<size {
            chain = E2EKDF.nextChainKey(chain)
            chainKeys.append(SecretBytes(chain))
        }
        return SendingReservation(
            ratchetKey: sendingRatchetKey.publicKey, count: sendingCount + size - 1, chain: SecretBytes(chain), size: size,
            chainKeys: chainKeys)
    }

    /// This session as it is stored under `reservation` (when it covers it): its sending chain
    /// at the reservation's count.
    func stored(under reservation: SendingReservation?) -> RatchetSession {
        guard let reservation, reservation.covers(self) else { return self }
        var stored = self
        stored.sendingChain = reservation.chain
        stored.sendingCount = reservation.count
        return stored
    }
}
