import NIOCore
import SIMPCore

/// Group chat: rooms are kept by the relay (in Redis). A message to a room is addressed to
/// `#<room>`; members receive it from `#<room>` with `author` naming who posted it.
extension SIMPClient {
    /// The address of `room` for `send(text:to:)`: `#<room>`.
    public static func roomAddress(_ room: String) -> String { "#" + room }

    /// Joins `room` (creating it if it has no members) and returns its members, this user included.
    /// Throws `SIMPClientError` (e.g. `.rejected(.badRequest, ...)` for an invalid name).
    public func joinRoom(_ room: String) async throws -> [String] {
        try await roomRequest(.roomJoin, room)
    }

    /// Leaves `room`.
    public func leaveRoom(_ room: String) async throws {
        _ = try await roomRequest(.roomLeave, room)
    }

    /// The members of `room`; only members may ask (else `.rejected(.notAMember, ...)`).
    public func roomMembers(_ room: String) async throws -> [String] {
        try await roomRequest(.roomMembers, room)
    }

    /// Admits `user` to `room` (docs/E2E.md §8.4): this device hands `user` its next sender
    /// key, and the admit goes end to end to the other admitted members, whose next posts
    /// `user` can read too. A user who joined by name without being admitted reads nothing.
    /// Throws `SIMPClientError.notEncryptable` without end to end (rooms are then readable by
    /// every member the relay lists).
    public func admit(_ user: String, toRoom room: String) async throws {
        try await onEngine { engine -> EventLoopFuture<Void> in
            guard let endToEnd = engine.endToEnd else {
                return engine.eventLoop.makeFailedFuture(
                    SIMPClientError.notEncryptable("admitting needs end to end: without it every member the relay lists reads the room"))
            }
            return endToEnd.admit(user, to: room, via: engine)
        }
    }

    /// Posts a text message to `room`. The result is `.stored` once the relay has taken it for
    /// the members; `notices` then reports `.roomProgress` as members receive it.
    public func send(text: String, toRoom room: String) async throws -> SendResult {
        try await send(text: text, to: Self.roomAddress(room))
    }

    private func roomRequest(_ kind: SIMPMessage.Kind, _ room: String) async throws -> [String] {
        try await onEngine { engine in engine.roomRequest(kind, room: room) }
    }
}
