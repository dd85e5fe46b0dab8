import NIOCore

/// Presence, read markers and WHO.
///
/// Presence changes (a session registered, a session ended) are recorded in the store and
/// pushed as PRESENCE frames to the local users who asked WHO about the user (its conversation
/// peers, in `simp chat`) and to the members of its rooms. READ markers are routed to the
/// original sender like receipts, and stored in its inbox if it is offline.
extension RelayCore {
    /// Users one WHO may ask about (and subscribe to).
    public static let maxWhoUsers = 256

    /// A READ from `user`: "I have seen `toUser`'s messages up to `messageId`".
    func routeRead(_ read: SIMPMessage, from user: String, into output: inout [RelayAction]) {
        var read = read
        read.fromUser = user // the relay vouches for the reader
        guard !read.toUser.isEmpty, read.messageId != 0, !Self.isRoomAddress(read.toUser) else {
            return output.append(.reject(.missingField, detail: "READ from \(user) without toUser or messageId, or for a room"))
        }
        let senders = sessions.connections(of: read.toUser)
        for sender in senders { output.append(.send(sender, read)) }
        if senders.isEmpty || sessions.isElsewhere(read.toUser) {
            output.append(.store(.storeInInbox(user: read.toUser, message: read)))
        }
    }

    /// A WHO from `user`: answered from the store; the asker follows the users' changes.
    func who(_ message: SIMPMessage, from user: String, on connection: ConnectionID, into output: inout [RelayAction]) {
        let room = message.room.isEmpty ? nil : message.room
        guard message.members.count <= Self.maxWhoUsers, room.map(Self.isValidRoomName) ?? true,
            room != nil || !message.members.isEmpty
        else {
            output += [
                .reject(.missingField, detail: "WHO from \(user) with \(message.members.count) users, room \"\(message.room)\""),
                .send(connection, .error(.badRequest, "WHO needs 1-\(Self.maxWhoUsers) users or a valid room", messageId: message.messageId)),
            ]
            return
        }
        output.append(.store(.who(WhoRequest(user: user, connection: connection, messageId: message.messageId, users: message.members, room: room))))
    }

    /// The store answered a `.who`: the answer goes back and the asker follows these users.
    mutating func whoAnswered(_ request: WhoRequest, _ result: Result<[PresenceEntry]?, StoreFailure>, into output: inout [RelayAction]) {
        guard case .success(let entries) = result else {
            return output.append(.send(request.connection, .error(.internal, "presence unavailable, try again", messageId: request.messageId)))
        }
        guard let entries else {
            return output.append(
                .send(request.connection, .error(.notAMember, "you are not a member of #\(request.room ?? "")", messageId: request.messageId)))
        }
        presence.follow(entries.map(\.user), by: request.user)
        var reply = SIMPMessage(kind: .who, messageId: request.messageId, toUser: request.user)
        reply.room = request.room ?? ""
        reply.members = entries.map(\.text)
        output.append(.send(request.connection, reply))
    }

    /// The store recorded `user`'s presence: local users who follow it or share a room with it
    /// get a PRESENCE frame; room peers connected to other relays get it through them.
    mutating func presenceRecorded(
        user: String, online: Bool, lastSeen: Int64, roomPeers: [String], now: NIODeadline, into output: inout [RelayAction]
    ) {
        let peers = Set(roomPeers)
        var audience = peers.union(presence.followers(of: user))
        audience.remove(user)
        var frame = SIMPMessage(kind: .presence, fromUser: user)
        frame.online = online
        frame.lastSeen = lastSeen
        for peer in audience.sorted() {
            frame.toUser = peer
            let connections = sessions.connections(of: peer)
            guard !connections.isEmpty else {
                presence.unfollow(user, by: peer) // followers who left stop following
                if peers.contains(peer) { routeRemote(.control(frame), to: peer, now: now, into: &output) }
                continue
            }
            for connection in connections { output.append(.send(connection, frame)) }
        }
    }
}
