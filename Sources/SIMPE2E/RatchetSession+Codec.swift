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
