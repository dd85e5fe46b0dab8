#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One message waiting in a user's offline inbox, in the text form kept in Redis:
/// `<storedAt ms> <base64 of the protobuf Message> <dedupe key>`.
///
/// The dedupe key names the message by its original sender and id, so a retransmission of a
/// message already stored is recognised and not stored twice.
public struct InboxEntry: Equatable, Sendable {
    /// The stored message: a content message (delivered over UDP) or a RECEIPT for the user as
    /// a sender (sent over the control channel).
    public let message: SIMPMessage
    /// Wall clock when the relay stored it, milliseconds since the Unix epoch.
    public let storedAt: Int64
    /// Identifies the message among the inbox's entries: `<kind>/<messageId>/<fromUser>`.
    public let dedupeKey: String
    /// The entry exactly as stored in Redis (used to remove exactly this entry).
    public let text: String

    /// An entry for `message`, stored at `storedAt`.
    public init(message: SIMPMessage, storedAt: Int64) {
        self.message = message
        self.storedAt = storedAt
        // A file's "received" news has no message id: it is named by its file.
        let id = message.kind == .fileAck ? message.fileId : message.messageId
        self.dedupeKey = Self.dedupeKey(kind: message.kind, messageId: id, fromUser: message.fromUser)
        let bytes = MessageCodec.encode(message)
        let base64 = Data(bytes.readableBytesView).base64EncodedString()
        self.text = "\(storedAt) \(base64) \(dedupeKey)"
    }

    /// Parses what `text` holds; nil for anything else.
    public init?(text: String) {
        let parts = text.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, let storedAt = Int64(parts[0]), let data = Data(base64Encoded: String(parts[1])) else { return nil }
        guard let message = try? data.withUnsafeBytes({ try MessageCodec.decode($0) }) else { return nil }
        self.message = message
        self.storedAt = storedAt
        self.dedupeKey = String(parts[2])
        self.text = text
    }

    /// The dedupe key of a message: receipts, read markers, a file's "received" news (its
    /// `messageId` is the file's id) and content messages never share one.
    public static func dedupeKey(kind: SIMPMessage.Kind, messageId: UInt64, fromUser: String) -> String {
        "\(kind == .receipt ? "r" : kind == .read ? "d" : kind == .fileAck ? "f" : "m")/\(messageId)/\(fromUser)"
    }

    /// Whether the entry is handed to a device on its control connection and removed (a stored
    /// receipt, read marker or file's "received" news), rather than delivered as a datagram.
    public var isHandedOver: Bool { message.kind == .receipt || message.kind == .read || message.kind == .fileAck }
}

/// Why a stored message left an inbox without being delivered.
/// (A full log refuses new entries instead of discarding stored ones: `InboxStoreResult.refused`.)
public enum InboxDiscardReason: Sendable, Equatable {
    /// The entry waited longer than the inbox TTL.
    case expired
}

/// What a sender learns about a message after the relay stored it for an offline receiver.
public enum DeliveryNotice: Equatable, Sendable {
    /// The relay took custody: the receiver is offline (the message waits in its inbox), or,
    /// with `receiverOnline`, one of its several devices is online and is getting it now.
    /// A "sent" tick, not "delivered"; `.delivered` follows.
    case stored(messageId: UInt64, to: String, receiverOnline: Bool = false)
    /// A stored message reached its receiver.
    case delivered(messageId: UInt64, to: String)
    /// A stored message was discarded (inbox cap or TTL) before it reached its receiver.
    case discarded(messageId: UInt64, to: String, SIMPMessage.ErrorCode, String)
    /// A room post has reached `delivered` of its `of` members.
    case roomProgress(messageId: UInt64, room: String, delivered: Int, of: Int)
    /// `by` has seen every message this user sent it up to id `upTo`.
    case read(upTo: UInt64, by: String)
    /// A message still has no receipt after `waitedMillis`: it is being retransmitted (not failed;
    /// the sender gives up only at its time limit, docs/PROTOCOL.md §6.2).
    case delayed(messageId: UInt64, to: String, waitedMillis: Int64)
    /// `device` of `by` has the whole file `fileId` this user sent through the relay (held for
    /// it: docs/PROTOCOL.md §5.7), its digest matched: the file is delivered.
    case fileReceived(fileId: UInt64, by: String, device: String)
}

/// News about other users that is not about a message of this user's.
public enum PeerEvent: Equatable, Sendable {
    /// `from` is typing to this user (at most once: a lost one is not resent).
    case typing(from: String)
    /// `user` went online or offline; `lastSeen` in ms since the epoch.
    case presence(user: String, online: Bool, lastSeen: Int64)
}
