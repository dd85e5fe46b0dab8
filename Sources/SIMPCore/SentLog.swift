import NIOCore
import SIMPE2E

/// The direct messages this device sealed lately, by id, so that one a peer device could not
/// decrypt can be sent again (docs/E2E.md §7.5), sans-I/O: how many and how long they are kept,
/// that each is sent again at most once and only to a device of its receiver that had a copy,
/// and what a request is answered. In memory only: the plaintexts are on the user's disk
/// already (history, outbox) and are not written anywhere new. The shell (`SIMPClient`'s
/// `EndToEnd+Resend`) records what it sends, seals again what `answer` says and tells the user.
public struct SentLog: Sendable {
    /// Most messages kept; the oldest goes first.
    public static let maxKept = 512
    /// How long a message is kept (a request comes a round trip after the message arrives).
    public static let lifetime: TimeAmount = .minutes(15)

    /// One message sent.
    public struct Entry: Sendable {
        /// The message as typed (content in the clear, its receiver in `toUser`), or nil for a
        /// frame of this layer that is not sent again (a resend request, a sender key).
        public var message: SIMPMessage?
        public let sentAt: NIODeadline
        /// Sent again once already: never twice (no loop between two devices).
        public var resent = false
        /// The devices that had a copy, with their identities then: only they may ask for it
        /// (nil: not recorded, anyone of the receiver's devices may).
        public var recipients: ResendRecipients? = nil
    }

    /// What to do when a peer device asks for a message again.
    public enum Answer: Sendable, Equatable {
        /// Seal `message` (as typed) again for the asking device only and send it under a new
        /// id (`recordResent`); the user is told it was sent again.
        case sendAgain(SIMPMessage)
        /// The asking device had no copy when the message was sent (a device added since, or
        /// with another key): nothing is sent, and the user is told it was refused.
        case refused
        /// The message is not kept here (older than `lifetime`, beyond `maxKept`, or never sent
        /// by this device): the user is told it cannot be sent again.
        case notKept
        /// A frame of this layer (a resend request, a sender key), a message to another user,
        /// or one sent again already: nothing is sent or said.
        case ignored
    }

    public private(set) var entries: [UInt64: Entry] = [:]
    private var order: [UInt64] = []

    public init() {}

    /// Keeps `message` (nil: a frame of this layer), sent as `id` at `now` to `recipients`,
    /// and forgets what is older than `lifetime` or beyond `maxKept`.
    public mutating func record(_ id: UInt64, _ message: SIMPMessage?, recipients: ResendRecipients? = nil, now: NIODeadline) {
        entries[id] = Entry(message: message, sentAt: now, recipients: recipients)
        order.append(id)
        while order.count > Self.maxKept || order.first.map({ now - (entries[$0]?.sentAt ?? now) > Self.lifetime }) == true {
            entries[order.removeFirst()] = nil
        }
    }

    /// Keeps `message`, sent again as `id` at `now`: it is never sent again a second time.
    public mutating func recordResent(_ id: UInt64, _ message: SIMPMessage, now: NIODeadline) {
        record(id, message, now: now)
        entries[id]?.resent = true
    }

    /// The entry of `id` sent to `peer`, marked resent; nil when there is none (or it was).
    public mutating func takeForResend(_ id: UInt64, to peer: String) -> Entry? {
        guard var entry = entries[id], !entry.resent, entry.message.map({ $0.toUser == peer }) ?? true else { return nil }
        entry.resent = true
        entries[id] = entry
        return entry
    }

    /// `peer`'s `device`, whose identity is `identity` now, asks for message `id` again: the
    /// answer, with the entry marked resent when it is sent again (or was a frame of this layer).
    public mutating func answer(_ id: UInt64, askedBy peer: String, device: String, identity: IdentityKey?) -> Answer {
        if let recipients = entries[id]?.recipients, !recipients.allows(device: device, identity: identity) { return .refused }
        guard let entry = takeForResend(id, to: peer) else { return contains(id) ? .ignored : .notKept }
        return entry.message.map(Answer.sendAgain) ?? .ignored
    }

    /// Whether message `id` is kept.
    public func contains(_ id: UInt64) -> Bool { entries[id] != nil }
}
