import NIOCore

/// What the client does when its outbox cannot be written (docs/E2E.md §15), without I/O:
/// a message the outbox cannot take (a full disk) is kept in memory, still sent and resent,
/// and new messages go to memory too until the outbox works again; the messages kept in memory
/// are written to it every `retryInterval` until that works; the user is told once when
/// writing fails and once when it works again. The shell writes and syncs the outbox, keeps
/// the retry's timer, and says what this decides. The session owns it (`outboxKeeping`).
public struct OutboxKeeping: Sendable, Equatable {
    /// How often messages kept in memory are tried again into an outbox that could not be written.
    public static let defaultRetryInterval: TimeAmount = .seconds(2)

    /// What follows a failed write.
    public struct Failed: Sendable, Equatable {
        /// The outbox worked until now: tell the user (once) that messages are kept in memory.
        public let tellUser: Bool
        /// Start a timer: the kept messages are written again then (nil: one is already planned).
        public let retryAt: NIODeadline?
    }

    public let retryInterval: TimeAmount
    /// Why the outbox could not be written at its last save or sync (nil: it could).
    public private(set) var failure: String?
    /// Sent messages whose outcome is not known and that are not in the outbox (there is none,
    /// or it could not be written), by id: lost if the process ends before their outcome.
    public private(set) var inMemory: [UInt64: SIMPMessage] = [:]
    /// When the kept messages are next written to the outbox; nil when none is planned.
    public private(set) var retryAt: NIODeadline?

    public init(retryInterval: TimeAmount = Self.defaultRetryInterval) {
        self.retryInterval = retryInterval
    }

    /// Whether a new message is written to the outbox now; false: it is kept in memory (the
    /// outbox failed; it is written with the others once the outbox works again).
    public var writesToOutbox: Bool { failure == nil }

    /// Keeps `message` (by its id) in memory only.
    public mutating func keepInMemory(_ message: SIMPMessage) {
        inMemory[message.messageId] = message
    }

    /// Message `id` has its outcome: it is no longer kept.
    public mutating func settled(_ id: UInt64) {
        inMemory.removeValue(forKey: id)
    }

    /// Saving or syncing the outbox failed (`reason`) at `now`.
    public mutating func writeFailed(_ reason: String, now: NIODeadline) -> Failed {
        let tell = failure == nil
        failure = reason
        guard retryAt == nil else { return Failed(tellUser: tell, retryAt: nil) }
        retryAt = now + retryInterval
        return Failed(tellUser: tell, retryAt: retryAt)
    }

    /// The retry's timer fired: the messages to write to the outbox now (all those kept in
    /// memory, oldest first), or nil when the outbox works (nothing to do).
    public mutating func retryDue() -> [SIMPMessage]? {
        retryAt = nil
        guard failure != nil else { return nil }
        return inMemory.values.sorted { $0.messageId < $1.messageId }
    }

    /// `messages` (from `retryDue`) are in the outbox now: it works again (tell the user).
    public mutating func rewritten(_ messages: [SIMPMessage]) {
        for message in messages { inMemory.removeValue(forKey: message.messageId) }
        failure = nil
    }
}
