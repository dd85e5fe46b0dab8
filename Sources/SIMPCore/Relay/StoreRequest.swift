import NIOCore

/// Everything the relay asks of its store (Redis in production, memory in tests and in the
/// simulator). Each request is answered once: with the `StoreAnswer` case of its own name,
/// through `RelayCore.storeAnswered`, or with a `StoreFailure`, through `RelayCore.storeFailed`;
/// the core decides what a failure means for the user.
public enum StoreRequest: Equatable, Sendable {
    // MARK: Login and sessions
    /// The user's password verifier (nil answer: no such user), and the failed-login counts all
    /// relays share for the user and `host`, the login's address.
    case fetchVerifier(user: String, connection: ConnectionID, host: String = "")
    /// Add a login's outcome to the failed-login counts all relays share.
    case recordLogin(LoginOutcome)
    /// Write the session's registration, replacing the one of an older receiving session of
    /// the same device (the newest wins); a receiving device becomes known.
    case register(Registration, connection: ConnectionID)
    /// Remove the registration of session `session` of the user (device `device`).
    case unregister(user: String, session: String, device: String = "")
    /// The session's route changed: its authenticated datagrams now come from a new address,
    /// or moved between UDP and its control connection (docs/PROTOCOL.md §5.5). Rewrites its
    /// registration.
    case moveRoute(Registration)
    /// Renew this relay's liveness record (it vouches for all the relay's registrations, and
    /// says where the relay listens), then write these registrations again (usually none: only
    /// while a re-write is in progress), re-creating lost ones.
    case refresh(relayId: String, description: String, [Registration])
    /// This relay stops: remove its liveness record and these registrations.
    case withdraw(relayId: String, [Registration])
    /// The user's sessions' routes, known devices, and whether the user is known (offline rather
    /// than unknown).
    case lookup(user: String)

    // MARK: Other relays
    /// Hand `delivery` to relay `relay`; the answer says how many relays heard it.
    case publish(relay: String, RelayDelivery)
    /// Tell every relay that a user's session is now here.
    case announceMove(UserMove)
    /// Whether the store still has session `session` of `user` (the answer names `session`
    /// itself, or what replaced it).
    case checkSession(user: String, session: String)

    // MARK: Inbox, rooms, presence
    /// Append `message` to `user`'s log (docs/PROTOCOL.md §6.6), unless an entry with its
    /// dedupe key is there; every known receiving device of the user (and its first device, if
    /// it has none yet) gets it.
    case storeInInbox(user: String, message: SIMPMessage)
    /// Read what `user`'s device `device` has not receipted (the entries after its cursor),
    /// oldest first, after the entries that expired now without reaching any device.
    case loadInbox(user: String, device: String = "")
    /// `user`'s device `device` has this entry (it receipted it, or it was handed over): its
    /// cursor moves past it; what every device has leaves the log.
    case removeFromInbox(user: String, entry: InboxEntry, device: String = "")
    /// A room join, leave or member list.
    case room(RoomRequest)
    /// If the author is a member, number the post (once per author and messageId) and read
    /// the members.
    case postToRoom(room: String, message: SIMPMessage)
    /// A member receipted room copy `copy`: count the member once per post.
    case countRoomDelivery(copy: SIMPMessage)
    /// Record `user`'s presence (`hidden`: the user turned presence off, so WHO answers it as
    /// unknown until a login turns it on again) and read the members of its rooms.
    case recordPresence(user: String, online: Bool, hidden: Bool = false)
    /// `user` sent content to `peer`: `peer` joins the users `user` shares a conversation with
    /// (who may see `user`'s presence and hear of its new devices; docs/PROTOCOL.md §4.8).
    case noteContact(user: String, peer: String)
    /// The presence of the request's users (or room members).
    case who(WhoRequest)

    // MARK: End-to-end keys (docs/PROTOCOL.md §4.8)
    /// Keep a device's key bundle and one-time prekeys; answered `.keysPublished`.
    case publishKeys(KeysPublish)
    /// Hand out a user's key bundles, claiming one-time prekeys; answered `.keys`.
    case fetchKeys(KeysFetch)

    // MARK: Files held for offline receivers (docs/PROTOCOL.md §5.7)
    /// Keep a sealed chunk of a file for its offline receiver, within the sender's quota.
    case holdFileChunk(HeldChunk)
    /// Read held chunks for the file's receiver (nil answer: no such file for that user).
    case fetchHeldChunks(HeldFileFetch)
    /// The receiver's `device` has the whole file: once every receiving device of `recipient`
    /// has it, the file is deleted. Answered `.releaseHeldFile`.
    case releaseHeldFile(owner: String, fileId: UInt64, recipient: String, device: String)
    /// Let a second receiver fetch a file its owner's upload left whole in the store, within
    /// the owner's quota; answered `.grantHeldFile`.
    case grantHeldFile(HeldFileGrant)
}

/// What the store answered, when it could carry a request out (a failure comes back as a
/// `StoreFailure`, through `RelayCore.storeFailed`). Each case is named after the request it
/// answers, repeats what the core needs of that request, and holds the answer of that request's
/// own type, so an answer of the wrong kind for a request cannot be written.
public enum StoreAnswer: Equatable, Sendable {
    /// A login's user: the password verifier (nil: no such user), whether an operator locked
    /// the user, and how many users have each PBKDF2 iteration count (for the decoy of a
    /// missing user, docs/PROTOCOL.md §4.2); `tokensDeniedBefore`: the operator refuses the
    /// user's access tokens issued before this time (ms since the epoch, §4.9).
    case fetchVerifier(
        connection: ConnectionID, PasswordVerifier?, locked: Bool = false, iterationCounts: [UInt32: Int] = [:],
        failures: SharedLoginFailures = .none, tokensDeniedBefore: Int64? = nil)
    /// The registration was written; the user has `knownDevices` receiving devices, and sessions
    /// on other relays if `elsewhere`.
    case register(connection: ConnectionID, knownDevices: Int, elsewhere: Bool)
    /// The user's sessions and devices.
    case lookup(user: String, UserRoutes)
    /// How many relays heard the publish (0: that relay is gone).
    case publish(relay: String, RelayDelivery, listeners: Int)
    /// The session the store names for the user now (nil: none).
    case checkSession(user: String, session: String, current: String?)
    /// The entry as stored (with the store's time stamp) and what became of it.
    case storeInInbox(user: String, message: SIMPMessage, InboxEntry, InboxStoreResult)
    /// What the device has not receipted, oldest first (entries older than the TTL among them
    /// are to be reported expired); `wallNow` is the store's clock (ms since the epoch);
    /// `earlier`: the entries in the log stored before the device became known (not for it).
    case loadInbox(user: String, device: String = "", [InboxEntry], wallNow: Int64, earlier: [InboxEntry] = [])
    case room(RoomRequest, RoomAnswer)
    case postToRoom(room: String, message: SIMPMessage, RoomPostResult)
    /// How many members have the room post of `copy` now.
    case countRoomDelivery(copy: SIMPMessage, delivered: Int)
    /// Presence written at `lastSeen` (ms since the epoch); `roomPeers` share a room with the user;
    /// `hidden`: the user turned presence off (nobody is told).
    case recordPresence(user: String, online: Bool, lastSeen: Int64, roomPeers: [String], hidden: Bool = false)
    /// Presence entries with what the core needs to decide what the asker is shown
    /// (`PresenceEntry.sharesConversation`, `hidden`); nil when the asker is not a member of
    /// the room asked about.
    case who(WhoRequest, [PresenceEntry]?)
    /// The relay's liveness record was renewed; `relayRecordWasMissing`: the store had lost it,
    /// so a new incarnation began and every registration of the relay must be written again.
    case refresh(relayRecordWasMissing: Bool)
    /// A write with nothing to report was done (`.unregister`, `.moveRoute`, `.withdraw`,
    /// `.announceMove`, `.removeFromInbox`, `.noteContact`).
    case written
    /// A device's bundle was kept; it has `prekeysLeft` one-time prekeys in the store now.
    /// `change`: whether the bundle is new or differs from the device's earlier one; `watchers`:
    /// the users who fetched this user's bundles lately and wrote to the user, or were written
    /// to by it, or share a room with it (told of a new or changed bundle; docs/PROTOCOL.md §4.8).
    case publishKeys(KeysPublish, prekeysLeft: Int, change: KeysPublish.Change = .unchanged, watchers: [String] = [])
    /// A user's devices' keys, sorted by device name; `known`: whether the user exists.
    /// `deviceList`: the user's signed device list kept (empty: none); `log`: the key directory
    /// log to prove it in (nil: the store keeps none).
    case fetchKeys(KeysFetch, [DeviceKeys], known: Bool, deviceList: [UInt8] = [], log: KeyLogSnapshot? = nil)
    /// The store did not carry out `request` (a `.register` of a new receiving device, a
    /// `.publishKeys` of a new device's bundle): it would take the user past the devices it
    /// may have (`RelayLimits.maxDevicesPerUser`). `reason` tells the user which limit.
    indirect case limitReached(StoreRequest, reason: String)
    /// What became of a chunk to hold.
    case holdFileChunk(HeldChunk, HeldChunkResult)
    /// The held chunks asked for, by index (those not uploaded yet are missing); nil: the store
    /// holds no such file for the asker.
    case fetchHeldChunks(HeldFileFetch, [UInt64: [UInt8]]?)
    /// What became of a grant.
    case grantHeldFile(HeldFileGrant, HeldFileGrantResult)
    /// The store recorded that `device` of `recipient` has the whole file: `firstTime` when it
    /// had not said so before (false too when the store holds no such file for `recipient`).
    case releaseHeldFile(owner: String, fileId: UInt64, recipient: String, device: String, firstTime: Bool)
}

/// What the store knows about a user's sessions and devices (docs/PROTOCOL.md §7.1).
public struct UserRoutes: Equatable, Sendable {
    /// The routes of the user's live receiving sessions, one per device.
    public var receivers: [Route]
    /// The relays holding any live session of the user (receiving or send-only), sorted.
    public var relays: [String]
    /// How many receiving devices the user has (live or not).
    public var knownDevices: Int
    /// Whether the user exists (has credentials, or registered before).
    public var known: Bool

    /// The answer of a store that knows nothing of devices: at most one route; `known`, without
    /// a route, says whether the user exists or registered before.
    public static func single(_ route: Route?, known: Bool) -> UserRoutes {
        UserRoutes(receivers: route.map { [$0] } ?? [], relays: route.map { [$0.relayId] } ?? [], knownDevices: 1, known: known)
    }

    public init(receivers: [Route], relays: [String], knownDevices: Int, known: Bool) {
        self.receivers = receivers
        self.relays = relays
        self.knownDevices = knownDevices
        self.known = known
    }
}

/// The store could not carry out a request (unreachable, an error reply).
public struct StoreFailure: Error, Equatable, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// What became of a stored message.
public struct InboxStoreResult: Sendable, Equatable {
    /// An entry with the same dedupe key was already in the log.
    public var duplicate: Bool
    /// The log was full (`--inbox-max-messages` entries no device has yet): the entry was not
    /// stored. What is stored stays; the new message's sender is told to try again later.
    public var refused: Bool
    /// Entries that left the log because they expired, before any device received them (each
    /// reported once).
    public var discarded: [DiscardedEntry]

    public init(duplicate: Bool, refused: Bool = false, discarded: [DiscardedEntry] = []) {
        self.duplicate = duplicate
        self.refused = refused
        self.discarded = discarded
    }
}

/// An inbox entry that left without being delivered, and why.
public struct DiscardedEntry: Sendable, Equatable {
    public var entry: InboxEntry
    public var reason: InboxDiscardReason
    public init(entry: InboxEntry, reason: InboxDiscardReason) {
        self.entry = entry
        self.reason = reason
    }
}

/// A room request from a client's control channel.
public struct RoomRequest: Sendable, Equatable {
    public enum Operation: Sendable, Equatable { case join, leave, members }
    public var operation: Operation
    public var room: String
    public var user: String
    public var connection: ConnectionID
    /// The request's messageId, echoed in the answer.
    public var messageId: UInt64

    public init(operation: Operation, room: String, user: String, connection: ConnectionID, messageId: UInt64) {
        self.operation = operation
        self.room = room
        self.user = user
        self.connection = connection
        self.messageId = messageId
    }
}

/// What the store said to a `RoomRequest`.
public enum RoomAnswer: Sendable, Equatable {
    /// The room's members (empty after a leave).
    case members([String])
    case notAMember
    /// A join refused: the user is in `RelayCore.maxRoomsPerUser` rooms, or the room has
    /// `RelayCore.maxRoomMembers` members (the text says which).
    case limitReached(String)
}

/// What the store said to a `.postToRoom`.
public enum RoomPostResult: Sendable, Equatable {
    /// The post has room sequence number `seq`; `duplicate` when it had been posted before
    /// (a retransmission). `members` are the room's members now.
    case posted(seq: UInt64, members: [String], duplicate: Bool)
    case notAMember
}

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

/// One user's presence as the store knows it (and, in a store's WHO answer, what decides
/// whether the asker may see it: `RelayCore.shownPresence`).
public struct PresenceEntry: Sendable, Equatable {
    public var user: String
    public var online: Bool
    /// ms since the epoch when the user was last connected; 0 if never seen; -1: unknown (no
    /// such user, or the asker may not see it).
    public var lastSeen: Int64
    /// WHO answers of the store only: the user shares a conversation or a room with the asker
    /// (the user sent the asker content lately, or both are members of one room).
    public var sharesConversation: Bool
    /// WHO answers of the store only: the user turned presence off.
    public var hidden: Bool

    public init(user: String, online: Bool, lastSeen: Int64, sharesConversation: Bool = false, hidden: Bool = false) {
        self.user = user
        self.online = online
        self.lastSeen = lastSeen
        self.sharesConversation = sharesConversation
        self.hidden = hidden
    }

    /// What WHO says of a user the asker may not see, and of one that does not exist: the same.
    public static func unknown(_ user: String) -> PresenceEntry { PresenceEntry(user: user, online: false, lastSeen: -1) }

    /// The WHO answer's text form: `<user> <online|offline> <lastSeen>`.
    public var text: String { "\(user) \(online ? "online" : "offline") \(lastSeen)" }

    /// Parses `text`; the user id may itself contain spaces.
    public init?(text: String) {
        let parts = text.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count >= 3, let lastSeen = Int64(parts[parts.count - 1]),
            ["online", "offline"].contains(parts[parts.count - 2])
        else { return nil }
        self.init(user: parts.dropLast(2).joined(separator: " "), online: parts[parts.count - 2] == "online", lastSeen: lastSeen)
    }
}
