import NIOCore

/// Presence, read markers and WHO.
///
/// Presence changes (a session registered, a session ended) are recorded in the store and
/// pushed as PRESENCE frames to the local users whose WHO was answered with the user's presence
/// (its conversation peers, in `simp chat`) and to the members of its rooms. A user's presence
/// is shown only to users it shares a conversation or a room with, to nobody if it turned
/// presence off, and last-seen only to the minute (docs/PROTOCOL.md §4.8, "What the relay
/// still learns"). READ markers are routed to the original sender like receipts, and stored in
/// its inbox if it is offline.
extension RelayCore {
    /// Users one WHO may ask about (and subscribe to).
    public static let maxWhoUsers = 256
    /// Last-seen times leave the relay rounded down to this many milliseconds (a minute).
    public static let lastSeenGranularity: Int64 = 60_000

    /// What a WHO shows of `entry`, as the store found it: a user who does not share a
    /// conversation or room with the asker, or turned presence off, or does not exist, is
    /// answered the same (unknown, last seen -1); a shown last-seen is rounded to the minute.
    public static func shownPresence(_ entry: PresenceEntry) -> PresenceEntry {
        guard entry.sharesConversation, !entry.hidden, entry.lastSeen >= 0 else { return .unknown(entry.user) }
        return PresenceEntry(user: entry.user, online: entry.online, lastSeen: coarseLastSeen(entry.lastSeen))
    }

    /// `lastSeen` (ms since the epoch) rounded down to `lastSeenGranularity`.
    public static func coarseLastSeen(_ lastSeen: Int64) -> Int64 { lastSeen - lastSeen % lastSeenGranularity }

    /// `user`'s session `session` sent content to `peer` (not a room): the store notes the
    /// conversation, at most once per `PresenceCore.contactRenewal` per pair on this relay.
    mutating func noteContact(from user: String, to peer: String, session: UInt64, now: NIODeadline, into output: inout [RelayAction]) {
        guard user != peer, !Self.isRoomAddress(peer), presence.notesContact(from: user, to: peer, session: session, now: now) else { return }
        output.append(.store(.noteContact(user: user, peer: peer)))
    }

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

    /// The store answered a `.who`: what the asker may see goes back (`shownPresence`), and the
    /// asker follows the users it was shown.
    mutating func whoAnswered(_ request: WhoRequest, _ result: Result<[PresenceEntry]?, StoreFailure>, into output: inout [RelayAction]) {
        guard case .success(let entries) = result else {
            return output.append(.send(request.connection, .error(.internal, "presence unavailable, try again", messageId: request.messageId)))
        }
        guard let entries else {
            return output.append(
                .send(request.connection, .error(.notAMember, "you are not a member of #\(request.room ?? "")", messageId: request.messageId)))
        }
        let shown = entries.map(Self.shownPresence)
        presence.follow(shown.filter { $0.lastSeen >= 0 }.map(\.user), by: request.user)
        var reply = SIMPMessage(kind: .who, messageId: request.messageId, toUser: request.user)
        reply.room = request.room ?? ""
        reply.members = shown.map(\.text)
        output.append(.send(request.connection, reply))
    }

    /// The store recorded `user`'s presence: local users who follow it or share a room with it
    /// get a PRESENCE frame; room peers connected to other relays get it through them. Nobody
    /// does when the user turned presence off (`hidden`).
    mutating func presenceRecorded(
        user: String, online: Bool, lastSeen: Int64, roomPeers: [String], hidden: Bool, now: NIODeadline, into output: inout [RelayAction]
    ) {
        guard !hidden else { return }
        let peers = Set(roomPeers)
        var audience = peers.union(presence.followers(of: user))
        audience.remove(user)
        var frame = SIMPMessage(kind: .presence, fromUser: user)
        frame.online = online
        frame.lastSeen = Self.coarseLastSeen(lastSeen)
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
