import SIMPCore
import SIMPE2E

/// Where a received message came from, as this device knows it (docs/E2E.md §10): `simp listen`
/// marks each line with it, so that a message the relay wrote itself (not end to end
/// encrypted) or one from a device the user did not verify is told from the others.
public struct MessageOrigin: Equatable, Sendable {
    /// Whether the message came end to end encrypted (and decrypted here).
    public var endToEnd: Bool
    /// The sending device of a direct message ("" when not known: a room post, a plaintext).
    public var device: String = ""
    /// Whether the user verified the sending device (for a room post: every device of its
    /// author) with the identity key it has now.
    public var verified = false
    /// Whether this is the sender's first message since its safety number changed.
    public var keyChanged = false

    public init(endToEnd: Bool, device: String = "", verified: Bool = false, keyChanged: Bool = false) {
        self.endToEnd = endToEnd
        self.device = device
        self.verified = verified
        self.keyChanged = keyChanged
    }

    /// The mark after the sender's name in a text line: `(phone, verified)`, `(phone, not
    /// verified, safety number changed)`, `(not end-to-end encrypted)`.
    public var mark: String {
        guard endToEnd else { return "(not end-to-end encrypted)" }
        let parts = (device.isEmpty ? [] : [device]) + [verified ? "verified" : "not verified"] + (keyChanged ? ["safety number changed"] : [])
        return "(" + parts.joined(separator: ", ") + ")"
    }
}

extension EndToEnd {
    /// Where `message` (decrypted, or a plaintext) came from; its sender's first message since
    /// a safety number change is marked once.
    func origin(of message: SIMPMessage) -> MessageOrigin {
        let isPost = RelayCore.isRoomAddress(message.fromUser)
        let sender = isPost ? message.author : message.fromUser
        let keyChanged = verifiedPeers.changedSinceLastMessage.remove(sender) != nil
        guard message.isEndToEnd else { return MessageOrigin(endToEnd: false, keyChanged: keyChanged) }
        if isPost {
            return MessageOrigin(endToEnd: true, verified: (try? verificationCheck(for: sender)) == .verified, keyChanged: keyChanged)
        }
        let device = (try? E2EEnvelope(encoded: message.e2ePayload))?.senderDevice ?? ""
        return MessageOrigin(endToEnd: true, device: device, verified: isVerified(sender, device: device), keyChanged: keyChanged)
    }
}
