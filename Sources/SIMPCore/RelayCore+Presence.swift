import NIOCore

/// A WHO request: the presence of `users`, or of `room`'s members.
public struct WhoRequest: Sendable, Equatable {
    public var user: String
    public var connection: ConnectionID
    public var messageId: UInt64
    public var users: [String]
    /// Set instead of `users`: ask about this room's members (the asker must be one).
    public var room: String?

    public init(user: String, connection: ConnectionID, messageId: UInt64, users: [String], room: String?) {
        self.user = user
        self.connection = connection
        self.messageId = messageId
        self.users = users
        self.room = room
    }
}

/// One user's presence as Redis knows it.
public struct PresenceEntry: Sendable, Equatable {
    public var user: String
    public var online: Bool
    /// ms since the epoch when the user was last connected; 0 if never seen.
    public var lastSeen: Int64
    public init(user: String, online: Bool, lastSeen: Int64) {
        self.user = user
        self.online = online
        self.lastSeen = lastSeen
    }

    /// The WHO answer's text form: `<user> <online|offline> <lastSeen>`.
    public var text: String { "\(user) \(online ? "online" : "offline") \(lastSeen)" }

    /// Parses `text`; the user id may itself contain spaces.
    public init?(text: String) {
        let parts = text.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count >= 3, let lastSeen = Int64(parts[parts.count - 1]),
              ["online", "offline"].contains(parts[parts.count - 2]) else { return nil }
        self.init(user: parts.dropLast(2).joined(separator: " "), online: parts[parts.count - 2] == "online", lastSeen: lastSeen)
    }
}

/// Presence, read markers and WHO.
///
/// Presence changes (a session registered, a session ended) are recorded in Redis and pushed as
/// PRESENCE frames to the local users who asked WHO about the user (its conversation peers, in
/// `simp chat`) and to the local members of its rooms. READ markers are routed to the original
/// sender like receipts, and stored in its inbox if it is offline.
extension RelayCore {
    /// Users one WHO may ask about (and subscribe to).
    public static let maxWhoUsers = 256

    /// A READ from `user`: "I have seen `toUser`'s messages up to `messageId`".
    func routeRead(_ read: SIMPMessage, from user: String) -> [Action] {
        var read = read
        read.fromUser = user // the relay vouches for the reader
        guard !read.toUser.isEmpty, read.messageId != 0, !Self.isRoomAddress(read.toUser) else {
            return [.reject(.missingField, detail: "READ from \(user) without toUser or messageId, or for a room")]
        }
        guard let sender = sessions[read.toUser] else { return [.storeInInbox(user: read.toUser, message: read)] }
        return [.send(sender.connection, read)]
    }

    /// A WHO from `user`: answered from Redis; the asker is subscribed to the users' changes.
    mutating func who(_ message: SIMPMessage, from user: String, on connection: ConnectionID) -> [Action] {
        let room = message.room.isEmpty ? nil : message.room
        guard message.members.count <= Self.maxWhoUsers, room.map(Self.isValidRoomName) ?? true,
              room != nil || !message.members.isEmpty else {
            return [.reject(.missingField, detail: "WHO from \(user) with \(message.members.count) users, room \"\(message.room)\""),
                    .send(connection, .error(.badRequest, "WHO needs 1-\(Self.maxWhoUsers) users or a valid room", messageId: message.messageId))]
        }
        return [.who(WhoRequest(user: user, connection: connection, messageId: message.messageId, users: message.members, room: room))]
    }

    /// Redis answered a `.who`: the answer goes back and the asker follows these users.
    public mutating func whoAnswered(_ request: WhoRequest, _ entries: [PresenceEntry]?) -> [Action] {
        guard let entries else {
            return [.send(request.connection, .error(.notAMember, "you are not a member of #\(request.room ?? "")", messageId: request.messageId))]
        }
        for entry in entries where entry.user != request.user { watchers[entry.user, default: []].insert(request.user) }
        var reply = SIMPMessage(kind: .who, messageId: request.messageId, toUser: request.user)
        reply.room = request.room ?? ""
        reply.members = entries.map(\.text)
        return [.send(request.connection, reply)]
    }

    /// Redis recorded `user`'s presence; `roomPeers` are the members of its rooms. Local users
    /// who follow it or share a room with it get a PRESENCE frame; room peers connected to
    /// other relays get it through them.
    public mutating func presenceRecorded(user: String, online: Bool, lastSeen: Int64, roomPeers: [String], now: NIODeadline = .now()) -> [Action] {
        var audience = Set(roomPeers)
        audience.formUnion(watchers[user] ?? [])
        audience.remove(user)
        var presence = SIMPMessage(kind: .presence, fromUser: user)
        presence.online = online
        presence.lastSeen = lastSeen
        var actions: [Action] = []
        let peersHere = Set(roomPeers)
        for peer in audience.sorted() {
            presence.toUser = peer
            guard let session = sessions[peer] else {
                watchers[user]?.remove(peer) // followers who left stop following
                if peersHere.contains(peer) { actions += routeRemote(.control(presence), to: peer, now: now) }
                continue
            }
            actions.append(.send(session.connection, presence))
        }
        if watchers[user]?.isEmpty == true { watchers[user] = nil }
        return actions
    }
}
