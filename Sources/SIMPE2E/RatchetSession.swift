import Crypto

/// One pairwise Double Ratchet session between this device and one peer device (docs/E2E.md
/// §4-§7). A value type: persist it with `secretBytes` after every `encrypt` and `decrypt`.
/// Each message is encrypted once; a retransmission resends the same bytes, and decrypting
/// them again throws `E2EError.duplicate` without changing the session.
public struct RatchetSession: Sendable, RedactedReflection {
    public let localIdentity: IdentityKey
    public let remoteIdentity: IdentityKey
    /// Whether this device started the session (sent the prekey message).
    public let isInitiator: Bool
    /// The initiator's ephemeral public key, which names the session.
    public let baseKey: [UInt8]

    var rootKey: SecretBytes
    /// The current sending ratchet key pair.
    var sendingRatchetKey: SendingRatchetKey
    var receivingRatchetKey: [UInt8]?
    var sendingChain: SecretBytes?
    var sendingCount: UInt32 = 0
    var previousSendingCount: UInt32 = 0
    var receivingChain: SecretBytes?
    var receivingCount: UInt32 = 0
    var skipped = SkippedMessageKeys()
    /// Earlier receiving ratchet keys, newest last, to recognise duplicates of their messages.
    var retiredReceivingKeys: [[UInt8]] = []
    /// The initiator's session-start fields, sent in front of every message until a reply arrives.
    var pendingStart: SessionStartFields?

    /// Whether messages still carry the session-start fields (no reply decrypted yet).
    public var isAwaitingReply: Bool { pendingStart != nil }

    /// associated data of every message: initiator identity ‖ responder identity (128 bytes).
    var sessionAssociatedData: [UInt8] {
        isInitiator ? localIdentity.encoded + remoteIdentity.encoded : remoteIdentity.encoded + localIdentity.encoded
    }

    /// Encrypts `plaintext` as the next message; the result is the payload to send (and to resend
    /// unchanged on retransmission).
    public mutating func encrypt(_ plaintext: [UInt8]) throws -> [UInt8] {
        try encrypt(plaintext, nextChainKey: nil)
    }

    /// `encrypt`, with the chain key that follows the current one when it is known already
    /// (reserving keys computed it, `SendingReservation`): one KDF step less.
    mutating func encrypt(_ plaintext: [UInt8], nextChainKey: [UInt8]?) throws -> [UInt8] {
        guard let chain = sendingChain else { throw E2EError.noSession("the responder cannot send before it has received") }
        let step = nextChainKey.map { (chainKey: $0, messageKey: E2EKDF.messageKey(chain.bytes)) } ?? E2EKDF.chainStep(chain.bytes)
        let header = RatchetHeader(
            ratchetKey: sendingRatchetKey.publicKey,
            previousChainLength: previousSendingCount, number: sendingCount)
        let prefix = PairwiseMessage.prefix(start: pendingStart, header: header)
        let sealed = E2ECipher.seal(
            plaintext, messageKey: step.messageKey, info: E2EKDF.messageInfo,
            associatedData: sessionAssociatedData + prefix)
        sendingChain = SecretBytes(step.chainKey)
        sendingCount += 1
        return prefix + sealed
    }

    func ratchetPrivateKey() throws -> Curve25519.KeyAgreement.PrivateKey {
        try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: sendingRatchetKey.privateKey.bytes)
    }

    public var description: String {
        "RatchetSession(remote \(remoteIdentity), sent \(sendingCount) in chain, received \(receivingCount) in chain, "
            + "\(skipped.count) skipped keys, keys redacted)"
    }
}

/// The sending ratchet's X25519 key pair: the private key, and the public key every message's
/// header carries. The public key is kept, not derived from the private one per message:
/// deriving it is an X25519 multiplication, about a quarter of the cost of encrypting.
struct SendingRatchetKey: Equatable, Sendable {
    let privateKey: SecretBytes
    let publicKey: [UInt8]

    init(_ key: Curve25519.KeyAgreement.PrivateKey) {
        privateKey = SecretBytes(Array(key.rawRepresentation))
        publicKey = Array(key.publicKey.rawRepresentation)
    }

    init(privateKey: SecretBytes, publicKey: [UInt8]) {
        self.privateKey = privateKey
        self.publicKey = publicKey
    }
}
