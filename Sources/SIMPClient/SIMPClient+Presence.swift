import NIOCore
import SIMPCore

/// Presence, read markers, typing indicators, and connecting again after a stop.
extension SIMPClient {
    /// The presence of `users`; from now on their changes arrive on `peerEvents`.
    public func who(_ users: [String]) async throws -> [PresenceEntry] {
        try await presence(room: "", users: users)
    }

    /// The presence of `room`'s members (members only); their changes arrive on `peerEvents`.
    public func who(room: String) async throws -> [PresenceEntry] {
        try await presence(room: room, users: [])
    }

    /// Tells `user` this user is typing. At most once: never retransmitted, never stored.
    /// Does nothing after `close()`.
    public func sendTyping(to user: String) async {
        try? await onEngine(now: { engine in engine.typing(to: user) })
    }

    /// Tells `sender` this user has seen its messages up to id `upTo` (stored for it if offline).
    /// Does nothing after `close()`.
    public func markRead(from sender: String, upTo: UInt64) async {
        try? await onEngine(now: { engine in engine.markRead(from: sender, upTo: upTo) })
    }

    /// Connects again after the client stopped for good (its login refused, say while an
    /// operator had locked the user; or taken over by a newer session of this device).
    /// Returns false when it had not stopped (it reconnects by itself) or is closed.
    public func reconnect() async -> Bool {
        (try? await onEngine(now: { engine in engine.connectAgain() })) ?? false
    }

    private func presence(room: String, users: [String]) async throws -> [PresenceEntry] {
        let lines = try await onEngine { engine in engine.roomRequest(.who, room: room, users: users) }
        return lines.compactMap(PresenceEntry.init(text:))
    }
}
