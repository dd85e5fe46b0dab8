/// The first byte of every end-to-end payload is the format version (1), the second its type.
public enum E2EMessageType: UInt8, Sendable {
    /// A pairwise message that also starts a session (docs/E2E.md §7.2).
    case prekey = 1
    /// A pairwise message in an established session (§7.1).
    case ratchet = 2
    /// A room post encrypted with the sender's sender key (§8.2).
    case room = 3
    /// A sender key, sent as the plaintext of a pairwise message (§8.1).
    case senderKeyDistribution = 4
    /// A request to send a message again on a new session, as the plaintext of a pairwise
    /// message (§7.5).
    case resendRequest = 6
    /// A member admits a user to a room, as the plaintext of a pairwise message (§8.4).
    case roomAdmit = 0x28
}

/// The ratchet header: the sender's current ratchet public key, the length of its previous
/// sending chain, and the message's number in the current chain. 40 bytes.
public struct RatchetHeader: Equatable, Sendable {
    public let ratchetKey: [UInt8]
    public let previousChainLength: UInt32
    public let number: UInt32

    func write(to writer: inout ByteWriter) {
        writer.raw(ratchetKey)
        writer.u32(previousChainLength)
        writer.u32(number)
    }

    init(ratchetKey: [UInt8], previousChainLength: UInt32, number: UInt32) {
        self.ratchetKey = ratchetKey
        self.previousChainLength = previousChainLength
        self.number = number
    }

    init(reading reader: inout ByteReader) throws {
        self.init(ratchetKey: try reader.key(), previousChainLength: try reader.u32(), number: try reader.u32())
    }
}

/// The session-start fields a prekey message carries before its header.
public struct SessionStartFields: Equatable, Sendable {
    static let hasOneTimePrekey: UInt8 = 0x01
    static let recoveryFlag: UInt8 = 0x02
    static let hasKEM: UInt8 = 0x04

    /// The initiator's identity.
    public let initiator: IdentityKey
    /// The initiator's ephemeral public key; it also names the session.
    public let baseKey: [UInt8]
    public let signedPrekeyID: UInt32
    public let oneTimePrekeyID: UInt32?
    /// The ML-KEM-768 ciphertext, when the bundle had a KEM prekey.
    public let kem: KEMEncapsulation?
    /// Set when the initiator starts over because it lost (or no longer trusts) its earlier
    /// session state: the receiver tells the user.
    public let isRecovery: Bool

    func write(to writer: inout ByteWriter) {
        writer.u8(
            (oneTimePrekeyID == nil ? 0 : Self.hasOneTimePrekey) | (isRecovery ? Self.recoveryFlag : 0)
                | (kem == nil ? 0 : Self.hasKEM))
        writer.raw(initiator.encoded)
        writer.raw(baseKey)
        writer.u32(signedPrekeyID)
        if let oneTimePrekeyID { writer.u32(oneTimePrekeyID) }
        if let kem {
            writer.u32(kem.prekeyID)
            writer.raw(kem.ciphertext)
        }
    }
}

extension SessionStartFields {
    init(reading reader: inout ByteReader) throws {
        let flags = try reader.u8()
        guard flags & ~(Self.hasOneTimePrekey | Self.recoveryFlag | Self.hasKEM) == 0 else {
            throw E2EError.malformed("prekey message: unknown flags \(flags)")
        }
        initiator = try IdentityKey(reading: &reader)
        baseKey = try reader.key()
        signedPrekeyID = try reader.u32()
        oneTimePrekeyID = flags & Self.hasOneTimePrekey != 0 ? try reader.u32() : nil
        kem =
            flags & Self.hasKEM != 0
            ? KEMEncapsulation(prekeyID: try reader.u32(), ciphertext: try reader.raw(KEMPrekey.ciphertextSize)) : nil
        isRecovery = flags & Self.recoveryFlag != 0
    }
}

/// A decoded pairwise payload: a ratchet message, or a prekey message (a ratchet message with
/// the session-start fields in front). The AEAD authenticates every byte before the ciphertext.
public struct PairwiseMessage: Equatable, Sendable {
    /// Present in a prekey message.
    public let start: SessionStartFields?
    public let header: RatchetHeader
    /// Every byte before the ciphertext, as sent.
    let authenticatedPrefix: [UInt8]
    /// AES-256-GCM ciphertext followed by its 16-byte tag.
    let ciphertext: [UInt8]

    public init(encoded: [UInt8]) throws {
        var reader = ByteReader(encoded, reading: "pairwise message")
        try reader.expectVersion(1)
        switch E2EMessageType(rawValue: try reader.u8()) {
        case .prekey: start = try SessionStartFields(reading: &reader)
        case .ratchet: start = nil
        default: throw E2EError.malformed("pairwise message: type is not 1 (prekey) or 2 (ratchet)")
        }
        header = try RatchetHeader(reading: &reader)
        authenticatedPrefix = Array(encoded.prefix(reader.offset))
        ciphertext = reader.rest()
        guard ciphertext.count >= E2ECipher.tagSize else { throw E2EError.malformed("pairwise message: no tag") }
    }

    /// The bytes before the ciphertext: version, type, session-start fields if any, header.
    static func prefix(start: SessionStartFields?, header: RatchetHeader) -> [UInt8] {
        var writer = ByteWriter()
        writer.u8(1)
        writer.u8((start == nil ? E2EMessageType.ratchet : .prekey).rawValue)
        start?.write(to: &writer)
        header.write(to: &writer)
        return writer.bytes
    }
}
