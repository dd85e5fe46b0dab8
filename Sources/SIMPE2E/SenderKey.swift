import Crypto

/// A sender key as distributed to room members over pairwise sessions (docs/E2E.md §8.1):
/// 0x01 0x04 ‖ room id (u16 length ‖ UTF-8) ‖ key id (u32) ‖ iteration (u32) ‖ chain key (32) ‖
/// Ed25519 public key (32). Secret: send it only as the plaintext of a pairwise message.
public struct SenderKeyDistribution: Equatable, Sendable, RedactedReflection {
    public let roomID: String
    public let keyID: UInt32
    /// The chain's iteration at `chainKey`: the receiver can read posts from this one on.
    public let iteration: UInt32
    let chainKey: SecretBytes
    /// Verifies the sender's room posts (members know the chain key, so the AEAD alone cannot).
    public let signingKey: [UInt8]

    public var encoded: SecretBytes {
        var writer = ByteWriter()
        writer.u8(1)
        writer.u8(E2EMessageType.senderKeyDistribution.rawValue)
        writer.lengthPrefixed(Array(roomID.utf8))
        writer.u32(keyID)
        writer.u32(iteration)
        writer.raw(chainKey.bytes)
        writer.raw(signingKey)
        return SecretBytes(writer.bytes)
    }

    public init(encoded: [UInt8]) throws {
        var reader = ByteReader(encoded, reading: "sender key distribution")
        try reader.expectVersion(1)
        guard try reader.u8() == E2EMessageType.senderKeyDistribution.rawValue else {
            throw E2EError.malformed("sender key distribution: type is not 4")
        }
        roomID = String(decoding: try reader.lengthPrefixed(), as: UTF8.self)
        keyID = try reader.u32()
        iteration = try reader.u32()
        chainKey = SecretBytes(try reader.key())
        signingKey = try reader.key()
        try reader.expectEnd()
    }

    init(roomID: String, keyID: UInt32, iteration: UInt32, chainKey: SecretBytes, signingKey: [UInt8]) {
        (self.roomID, self.keyID, self.iteration, self.chainKey, self.signingKey) = (roomID, keyID, iteration, chainKey, signingKey)
    }

    public var description: String { "SenderKeyDistribution(room \(roomID), key \(keyID), iteration \(iteration), chain key redacted)" }
}

/// A room post (§8.2): 0x01 0x03 ‖ key id (u32) ‖ iteration (u32) ‖ ciphertext ‖ tag ‖
/// Ed25519 signature (64) of `signedBytes`.
public struct RoomMessage: Equatable, Sendable {
    public let keyID: UInt32
    public let iteration: UInt32
    /// Every byte before the signature.
    let body: [UInt8]
    let signature: [UInt8]
    static let headerSize = 10

    public init(encoded: [UInt8]) throws {
        var reader = ByteReader(encoded, reading: "room message")
        try reader.expectVersion(1)
        guard try reader.u8() == E2EMessageType.room.rawValue else { throw E2EError.malformed("room message: type is not 3") }
        keyID = try reader.u32()
        iteration = try reader.u32()
        guard encoded.count >= Self.headerSize + E2ECipher.tagSize + 64 else { throw E2EError.malformed("room message: too short") }
        body = Array(encoded.dropLast(64))
        signature = Array(encoded.suffix(64))
    }

    var ciphertext: [UInt8] { Array(body.dropFirst(Self.headerSize)) }

    /// AEAD associated data: room id (u16 length ‖ UTF-8) ‖ the 10 header bytes.
    static func associatedData(roomID: String, header: ArraySlice<UInt8>) -> [UInt8] {
        var writer = ByteWriter()
        writer.lengthPrefixed(Array(roomID.utf8))
        writer.raw(Array(header))
        return writer.bytes
    }

    /// "SIMP-E2E v1 room signature" ‖ room id (u16 length ‖ UTF-8) ‖ body.
    static func signedBytes(roomID: String, body: [UInt8]) -> [UInt8] {
        var writer = ByteWriter()
        writer.raw(Array("SIMP-E2E v1 room signature".utf8))
        writer.lengthPrefixed(Array(roomID.utf8))
        writer.raw(body)
        return writer.bytes
    }
}

/// This device's own sender key for one room: encrypts each post once, with the next message
/// key of its chain, and signs it.
public struct OutboundSenderKey: Sendable, RedactedReflection {
    public let roomID: String
    public let keyID: UInt32
    public internal(set) var iteration: UInt32 = 0
    var chainKey: SecretBytes
    let signingKey: SecretBytes

    /// A new sender key; draws the key id (4 bytes of a `next()`), chain key, then signing seed.
    public init(roomID: String, using random: inout some RandomNumberGenerator) {
        self.roomID = roomID
        keyID = UInt32(truncatingIfNeeded: random.next())
        chainKey = SecretBytes(random.bytes(32))
        signingKey = SecretBytes(random.bytes(32))
    }

    /// What members need to read this device's posts from the next one on.
    public var distribution: SenderKeyDistribution {
        let publicKey = try! Curve25519.Signing.PrivateKey(rawRepresentation: signingKey.bytes).publicKey
        return SenderKeyDistribution(
            roomID: roomID, keyID: keyID, iteration: iteration, chainKey: chainKey,
            signingKey: Array(publicKey.rawRepresentation))
    }

    /// Encrypts and signs one post; send (and resend) the result unchanged to every member.
    public mutating func encrypt(_ plaintext: [UInt8]) -> [UInt8] {
        let step = E2EKDF.chainStep(chainKey.bytes)
        var writer = ByteWriter()
        writer.u8(1)
        writer.u8(E2EMessageType.room.rawValue)
        writer.u32(keyID)
        writer.u32(iteration)
        let header = writer.bytes
        let body =
            header
            + E2ECipher.seal(
                plaintext, messageKey: step.messageKey, info: E2EKDF.roomMessageInfo,
                associatedData: RoomMessage.associatedData(roomID: roomID, header: header[...]))
        let signer = try! Curve25519.Signing.PrivateKey(rawRepresentation: signingKey.bytes)
        chainKey = SecretBytes(step.chainKey)
        iteration += 1
        return body + Array(try! signer.signature(for: RoomMessage.signedBytes(roomID: roomID, body: body)))
    }

    public var description: String { "OutboundSenderKey(room \(roomID), key \(keyID), iteration \(iteration), keys redacted)" }
}

/// Another member's sender key, as received in a distribution: decrypts its posts, with late
/// posts served from bounded skipped keys and duplicates recognised.
public struct InboundSenderKey: Sendable, RedactedReflection {
    public let roomID: String
    public let keyID: UInt32
    let signingKey: [UInt8]
    var chainKey: SecretBytes
    var iteration: UInt32
    var skipped = SkippedMessageKeys()

    public init(_ distribution: SenderKeyDistribution) {
        (roomID, keyID, signingKey) = (distribution.roomID, distribution.keyID, distribution.signingKey)
        (chainKey, iteration) = (distribution.chainKey, distribution.iteration)
    }

    /// Verifies the signature, then decrypts; a failure leaves the key as it was.
    public mutating func decrypt(_ message: RoomMessage, now: UInt64, limits: E2ELimits = .standard) throws -> [UInt8] {
        guard message.keyID == keyID else { throw E2EError.noSession("room \(roomID): unknown sender key \(message.keyID)") }
        guard let verifier = try? Curve25519.Signing.PublicKey(rawRepresentation: signingKey),
            verifier.isValidSignature(message.signature, for: RoomMessage.signedBytes(roomID: roomID, body: message.body))
        else {
            throw E2EError.authenticationFailed
        }
        skipped.forgetExpired(now: now, limits: limits)
        var next = self
        let messageKey = try next.messageKey(for: message.iteration, now: now, limits: limits)
        let plaintext = try E2ECipher.open(
            message.ciphertext, messageKey: messageKey, info: E2EKDF.roomMessageInfo,
            associatedData: RoomMessage.associatedData(roomID: roomID, header: message.body.prefix(RoomMessage.headerSize)))
        self = next
        return plaintext
    }

    private mutating func messageKey(for target: UInt32, now: UInt64, limits: E2ELimits) throws -> [UInt8] {
        let chain = withUnsafeBytes(of: keyID.bigEndian) { Array($0) }
        if let kept = skipped.take(chain: chain, number: target) { return kept.bytes }
        guard target >= iteration else { throw E2EError.duplicate }
        guard target - iteration <= limits.maxSkipPerChain else {
            throw E2EError.tooManySkipped(requested: target - iteration, limit: limits.maxSkipPerChain)
        }
        while true {
            let step = E2EKDF.chainStep(chainKey.bytes)
            chainKey = SecretBytes(step.chainKey)
            iteration += 1
            if iteration - 1 == target { return step.messageKey }
            // Only the newest `maxSkippedKeys` could stay: older ones are not kept at all.
            guard Int(target - (iteration - 1)) <= limits.maxSkippedKeys else { continue }
            skipped.insert(
                .init(chain: chain, number: iteration - 1, messageKey: SecretBytes(step.messageKey), storedAt: now),
                limits: limits)
        }
    }

    public var description: String { "InboundSenderKey(room \(roomID), key \(keyID), next iteration \(iteration), keys redacted)" }
}
