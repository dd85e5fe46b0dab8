import NIOCore
import SIMPCore

/// What `InMemoryRelayStore` keeps, with the same meaning as the Redis schema (docs/PROTOCOL.md
/// §7) but without expiry other than the inbox TTL: credentials, registrations, known users,
/// inboxes with their cap and TTL, rooms with numbered posts, presence.
struct MemoryStoreState: Sendable {
    var limits: RedisRelayStore.Limits
    var credentials: [String: PasswordVerifier] = [:]
    var registrations: [String: Registration] = [:]
    var known: Set<String> = []
    var inboxes: [String: [InboxEntry]] = [:]
    var roomMembers: [String: Set<String>] = [:]
    var roomSeq: [String: UInt64] = [:]
    /// `room` → `author/messageId` → seq, so a retransmitted post is numbered once.
    var roomPosts: [String: [String: UInt64]] = [:]
    /// `room/author/messageId` → members who have the post.
    var roomDelivered: [String: Set<String>] = [:]
    var presence: [String: PresenceEntry] = [:]

    init(limits: RedisRelayStore.Limits) { self.limits = limits }

    /// Carries out everything but publishing (which needs the subscribers).
    mutating func answer(_ request: StoreRequest, now: Int64) -> StoreAnswer {
        switch request {
        case .fetchVerifier(let user, _): // answered by InMemoryRelayStore, which knows the locks
            return .verifier(credentials[user])
        case .register(let registration, _):
            registrations[registration.user] = registration
            known.insert(registration.user)
            return .done
        case .unregister(let user, let session):
            if registrations[user]?.session == session { registrations[user] = nil }
            return .done
        case .moveRoute(let registration):
            refresh([registration])
            return .done
        case .refresh(_, _, let live):
            refresh(live)
            for registration in live { presence[registration.user] = PresenceEntry(user: registration.user, online: true, lastSeen: now) }
            return .done
        case .withdraw(_, let live):
            for registration in live where registrations[registration.user]?.session == registration.session {
                registrations[registration.user] = nil
            }
            return .done
        case .lookup(let user):
            let route = registrations[user]?.route
            return .route(route, known: route != nil || known.contains(user) || credentials[user] != nil)
        case .publish:
            return .listeners(0)
        case .announceMove:
            return .done
        case .checkSession(let user, _):
            return .currentSession(registrations[user]?.session)
        case .storeInInbox(let user, let message):
            let entry = InboxEntry(message: message, storedAt: now)
            return .inboxStored(entry, store(entry, for: user, now: now))
        case .loadInbox(let user):
            return .inboxLoaded(inboxes[user] ?? [], wallNow: now)
        case .removeFromInbox(let user, let entry):
            inboxes[user]?.removeAll { $0 == entry }
            return .done
        case .room(let roomRequest):
            return .room(room(roomRequest))
        case .postToRoom(let room, let message):
            return .roomPosted(post(message, to: room))
        case .countRoomDelivery(let copy):
            let key = "\(copy.room)/\(copy.author)/\(copy.authorMessageId)"
            roomDelivered[key, default: []].insert(copy.toUser)
            return .deliveredCount(roomDelivered[key]!.count)
        case .recordPresence(let user, let online):
            presence[user] = PresenceEntry(user: user, online: online, lastSeen: now)
            let peers = roomMembers.values.filter { $0.contains(user) }.reduce(into: Set<String>()) { $0.formUnion($1) }
            return .presenceRecorded(lastSeen: now, roomPeers: peers.sorted())
        case .who(let who):
            let users: [String]
            if let room = who.room {
                guard let members = roomMembers[room], members.contains(who.user) else { return .presence(nil) }
                users = members.sorted()
            } else {
                users = who.users
            }
            return .presence(users.map { presence[$0] ?? PresenceEntry(user: $0, online: false, lastSeen: 0) })
        }
    }

    private mutating func refresh(_ live: [Registration]) {
        for registration in live where registrations[registration.user].map({ $0.session == registration.session }) ?? true {
            registrations[registration.user] = registration
        }
    }

    private mutating func store(_ entry: InboxEntry, for user: String, now: Int64) -> InboxStoreResult {
        var inbox = inboxes[user] ?? []
        var discarded: [DiscardedEntry] = []
        let cutoff = now - Int64(limits.inboxTTLSeconds) * 1000
        while let head = inbox.first, head.storedAt < cutoff {
            discarded.append(DiscardedEntry(entry: inbox.removeFirst(), reason: .expired))
        }
        if inbox.contains(where: { $0.dedupeKey == entry.dedupeKey }) {
            inboxes[user] = inbox
            return InboxStoreResult(duplicate: true, discarded: discarded)
        }
        inbox.append(entry)
        while inbox.count > limits.inboxMaxMessages {
            discarded.append(DiscardedEntry(entry: inbox.removeFirst(), reason: .full))
        }
        inboxes[user] = inbox
        return InboxStoreResult(duplicate: false, discarded: discarded)
    }

    private mutating func room(_ request: RoomRequest) -> RoomAnswer {
        switch request.operation {
        case .join:
            roomMembers[request.room, default: []].insert(request.user)
            return .members(roomMembers[request.room]!.sorted())
        case .leave:
            roomMembers[request.room]?.remove(request.user)
            return .members([])
        case .members:
            guard let members = roomMembers[request.room], members.contains(request.user) else { return .notAMember }
            return .members(members.sorted())
        }
    }

    private mutating func post(_ message: SIMPMessage, to room: String) -> RoomPostResult {
        guard let members = roomMembers[room], members.contains(message.fromUser) else { return .notAMember }
        let key = "\(message.fromUser)/\(message.messageId)"
        if let seq = roomPosts[room]?[key] { return .posted(seq: seq, members: members.sorted(), duplicate: true) }
        let seq = roomSeq[room, default: 0] + 1
        roomSeq[room] = seq
        roomPosts[room, default: [:]][key] = seq
        return .posted(seq: seq, members: members.sorted(), duplicate: false)
    }
}
