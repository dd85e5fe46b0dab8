import NIOCore
import SIMPCore

/// Presence, read markers and typing indicators.
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
    public func sendTyping(to user: String) async {
        let engine = self.engine
        try? await engine.eventLoop.submit { engine.typing(to: user) }.get()
    }

    /// Tells `sender` this user has seen its messages up to id `upTo` (stored for it if offline).
    public func markRead(from sender: String, upTo: UInt64) async {
        let engine = self.engine
        try? await engine.eventLoop.submit { engine.markRead(from: sender, upTo: upTo) }.get()
    }

    private func presence(room: String, users: [String]) async throws -> [PresenceEntry] {
        let engine = self.engine
        let lines = try await engine.eventLoop.flatSubmit { engine.roomRequest(.who, room: room, users: users) }.get()
        return lines.compactMap(PresenceEntry.init(text:))
    }
}
