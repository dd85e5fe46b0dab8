import Foundation
import SIMPClient
import SIMPCore
import Synchronization

/// A user's history as `simp chat` keeps it: loaded at start, and the record of the messages
/// this chat received. An incoming message is appended to the history by the client's message
/// handler (`recordIncoming`), on the client's event loop before its receipt is written, so a
/// receipt means the message is in the history; one that is there already (delivered again
/// after a restart because a crash cut its receipt off, or resent from its sender's outbox) is
/// neither stored nor shown again (docs/PROTOCOL.md §6.4).
public final class ChatHistory: Sendable {
    /// Where the history file lives.
    public let directory: URL
    /// The history file; nil when it cannot be used (history is off).
    public let store: HistoryStore?
    /// The entries at start, oldest first.
    public let entries: [HistoryEntry]
    /// The incoming messages in the history (loaded and appended since).
    private let incoming: Mutex<Set<DeliveredKey>>

    /// Loads `user`'s history from `directory`.
    public init(directory: URL, user: String) {
        self.directory = directory
        store = try? HistoryStore(directory: directory, user: user)
        entries = (try? store?.load()) ?? []
        incoming = Mutex(Set(entries.compactMap(\.incomingKey)))
    }

    /// Appends `message` to the history unless it is there already; returns whether it is new
    /// (install as `ClientConfiguration.messageHandler`).
    public func recordIncoming(_ message: SIMPMessage) -> Bool {
        incoming.withLock { keys in
            guard keys.insert(DeliveredKey(message)).inserted else { return false }
            try? store?.append(HistoryEntry(received: message))
            return true
        }
    }
}

extension HistoryEntry {
    /// The key of a received message (nil for one this user sent, which has a status).
    var incomingKey: DeliveredKey? {
        status == nil ? DeliveredKey(sender: from, author: author ?? "", messageId: id) : nil
    }
}
