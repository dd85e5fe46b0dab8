import NIOCore

/// The relay's logged-in sessions, keyed by session id: whose each one is, which device it
/// speaks for, whether it receives, its control connection, its UDP route and its datagram
/// keys. A user may have several sessions here: at most one receiving session per device, and
/// any number of send-only ones (docs/PROTOCOL.md §4.7). Which session a connection holds is
/// the connection's phase (`ConnectionTable`, its one owner): asked there, not kept here.
public struct SessionTable: Sendable {
    struct Session: Sendable {
        var user: String
        var device: String
        /// False for a send-only session: never a route for content, never given stored messages.
        var receives: Bool
        var connection: ConnectionID
        var route: Route
        /// The registration's owner token in the store.
        var token: String
        var opener: DatagramOpener
        var sealer: DatagramSealer
        /// When the session may next be told it is throttled.
        var nextThrottleNotice: NIODeadline = .uptimeNanoseconds(0)
        /// Whether the client said in CONNECT that it reads batch receipts.
        var readsBatchReceipts = false
        /// Whether the session's datagrams go in DATAGRAM frames on its control connection
        /// rather than over UDP (docs/PROTOCOL.md §5.5).
        var overControl = false

        var registration: Registration {
            Registration(user: user, route: route, session: token, device: device, receives: receives, overControl: overControl)
        }
    }

    /// What the relay knows about one user's sessions here.
    struct UserSessions: Sendable {
        /// Every session of the user here, oldest first.
        var ids: [UInt64] = []
        /// Receiving sessions here.
        var receiving = 0
        /// The user's known receiving devices anywhere, as the store last said (at least 1).
        var knownDevices = 1
        /// Content may go straight to the one receiving session (see `isSoleReceiver`).
        var hasSoleReceiver: Bool { receiving == 1 && knownDevices <= 1 }
        /// Whether the store last said the user also has sessions on other relays.
        var elsewhere = false
    }

    /// An authentic datagram: whose session sealed it, and what it carried.
    public struct OpenedDatagram: Sendable, Equatable {
        public var user: String
        /// The session that sealed it.
        public var sessionId: UInt64
        public var payload: ByteBuffer
        /// Whether it carries the session's highest counter so far (its source may move the route).
        public var isNewest: Bool
        /// Whether this, the session's newest authentic datagram, came from a new address (NAT
        /// rebinding, roaming): the route moved there, and `registration(ofSession:)` says so. A
        /// flag, not the registration: an optional `Registration` (strings and a `SocketAddress`)
        /// in every opened datagram cost about 200 instructions to destroy, nil or not.
        public var routeMoved = false
        /// Whether the session's datagrams go over its control connection now.
        public var overControl = false
        /// The session's control connection (an authentic datagram proves its client alive).
        public var connection = ConnectionID(0)
    }

    private var sessions: [UInt64: Session] = [:]
    private var users: [String: UserSessions] = [:]
    /// Sessions whose datagrams go over their control connection.
    public private(set) var countOverControl = 0

    public init() {}

    /// Every session: how many there are (`sessionCount`), against `countOverControl`.
    public var sessionCount: Int { sessions.count }

    /// Users with at least one session.
    public var count: Int { users.count }
    public func contains(_ user: String) -> Bool { users[user] != nil }
    /// Whether `user` has a receiving session here.
    public func hasReceiver(_ user: String) -> Bool { (users[user]?.receiving ?? 0) > 0 }
    /// The control connections of `user`'s sessions, oldest first.
    public func connections(of user: String) -> [ConnectionID] {
        users[user]?.ids.compactMap { sessions[$0]?.connection } ?? []
    }
    /// For a receipt frame forwarded as it came: calls `body` with the control connection of
    /// each of `user`'s sessions here, oldest first, and returns how many. None (0) when `user`
    /// has no session here or also has sessions on other relays (`isElsewhere`), or, for a
    /// `batch`, when not every client here reads batch receipts (said in CONNECT). The
    /// user's name is hashed once for all of it, no array is built, and each session is read
    /// in place (`inPlace`).
    public mutating func forEachReceiptConnection(of user: String, batch: Bool, _ body: (ConnectionID) -> Void) -> Int {
        guard let entry = users.index(forKey: user).map({ users.values[$0] }), !entry.elsewhere else { return 0 }
        let ids = entry.ids
        if batch, !ids.allSatisfy({ sessions[$0]?.readsBatchReceipts ?? false }) { return 0 }
        var count = 0
        for id in ids {
            guard let index = sessions.index(forKey: id) else { continue }
            body(inPlace(index) { $0.connection })
            count += 1
        }
        return count
    }
    /// Whether session `id`'s client reads batch receipts (said so in CONNECT).
    public func readsBatchReceipts(ofSession id: UInt64) -> Bool { sessions[id]?.readsBatchReceipts ?? false }
    /// The control connection of session `id`.
    public func connection(ofSession id: UInt64) -> ConnectionID? { sessions[id]?.connection }
    /// The registration of session `id`.
    public func registration(ofSession id: UInt64) -> Registration? { sessions[id]?.registration }
    /// The registrations of `user`'s sessions here.
    public func registrations(of user: String) -> [Registration] {
        users[user]?.ids.compactMap { sessions[$0]?.registration } ?? []
    }
    /// Every session's registration (a stable order: a seeded run replays exactly).
    public var registrations: [Registration] {
        Self.inOrder(sessions.values.lazy.map(\.registration))
    }
    /// The registrations whose session id is `slice` modulo `slices`, in the same order.
    public func registrations(inSlice slice: Int, of slices: Int) -> [Registration] {
        Self.inOrder(sessions.lazy.filter { $0.key % UInt64(slices) == UInt64(slice) }.map(\.value.registration))
    }
    /// `registrations` by user, then session token (a stable order for the store and tests).
    private static func inOrder(_ registrations: some Sequence<Registration>) -> [Registration] {
        registrations.sorted { ($0.user, $0.session) < ($1.user, $1.session) }
    }
    /// `user`'s session whose registration token is `token`.
    public func session(of user: String, token: String) -> UInt64? {
        users[user]?.ids.first { sessions[$0]?.token == token }
    }
    /// The receiving devices of `user` with a session here.
    public func receivers(of user: String) -> [Recipient] {
        users[user]?.ids.compactMap { id in sessions[id].flatMap { $0.receives ? Recipient(user: $0.user, device: $0.device) : nil } } ?? []
    }
    /// The receiving session of `user`'s `device`.
    public func receivingSession(of user: String, device: String) -> UInt64? {
        users[user]?.ids.first { sessions[$0].map { $0.receives && $0.device == device } ?? false }
    }
    /// The recipient session `id` receives as (nil for a send-only session).
    public func recipient(ofSession id: UInt64) -> Recipient? {
        sessions[id].flatMap { $0.receives ? Recipient(user: $0.user, device: $0.device) : nil }
    }

    /// The user whose session has id `sessionId`.
    public func user(ofSession sessionId: UInt64) -> String? { sessions[sessionId]?.user }

    /// Whether content for `user` may go straight to its one receiving session here: the user
    /// has exactly one receiving session here and no other known device (otherwise the relay
    /// keeps it in the user's log for every device).
    public func isSoleReceiver(_ user: String) -> Bool {
        users[user]?.hasSoleReceiver ?? false
    }

    /// Whether the store said `user` also has sessions on other relays.
    public func isElsewhere(_ user: String) -> Bool { users[user]?.elsewhere ?? false }

    /// What the store said about `user`'s devices: `knownDevices` receiving devices exist, and
    /// whether sessions of the user live on other relays.
    public mutating func learned(_ user: String, knownDevices: Int, elsewhere: Bool) {
        guard users[user] != nil else { return }
        users[user]!.knownDevices = max(1, knownDevices)
        users[user]!.elsewhere = elsewhere
    }

    /// A session id no live session uses.
    public func unusedSessionId(_ entropy: inout Entropy, in idClass: SessionIdClass = SessionIdClass(index: 0, count: 1)) -> UInt64 {
        while true {
            let id = idClass.member(near: entropy.next())
            if id != 0, sessions[id] == nil { return id }
        }
    }

    /// Starts a session of `registration`'s user and device on `connection`. The caller ends
    /// a receiving session of the same device first (the newest wins). `readsBatchReceipts`:
    /// the client's CONNECT said it reads batch receipts.
    public mutating func start(_ registration: Registration, keys: SessionKeys, on connection: ConnectionID, readsBatchReceipts: Bool = false) {
        sessions[keys.sessionId] = Session(
            user: registration.user, device: registration.device, receives: registration.receives, connection: connection,
            route: registration.route, token: registration.session,
            opener: DatagramOpener(keys: keys, direction: .uplink), sealer: DatagramSealer(keys: keys, direction: .downlink),
            readsBatchReceipts: readsBatchReceipts)
        users[registration.user, default: UserSessions()].ids.append(keys.sessionId)
        if registration.receives { users[registration.user]!.receiving += 1 }
    }

    /// Ends session `id`; returns its registration (nil if there is no such session).
    @discardableResult
    public mutating func end(_ id: UInt64) -> Registration? {
        guard let session = sessions.removeValue(forKey: id) else { return nil }
        if session.overControl { countOverControl -= 1 }
        if var entry = users[session.user] {
            entry.ids.removeAll { $0 == id }
            if session.receives { entry.receiving -= 1 }
            users[session.user] = entry.ids.isEmpty ? nil : entry
        }
        return session.registration
    }

    /// Opens a sealed datagram with its session's keys (MAC, replay window); the newest
    /// authentic datagram from a new address moves the session's route there.
    public mutating func open(_ bytes: ByteBuffer, from source: SocketAddress) -> Result<OpenedDatagram, RelayRejection> {
        guard let sessionId = SealedDatagram.sessionId(of: bytes) else {
            return .failure(RelayRejection(.unsealed, "\(bytes.readableBytes) bytes from \(source)"))
        }
        // One hash lookup; the session's opener is used in place.
        guard let index = sessions.index(forKey: sessionId) else {
            return .failure(RelayRejection(.unknownSession, "session \(sessionId) from \(source)"))
        }
        return open(bytes, at: index, from: source)
    }

    /// Opens a sealed datagram carried in a DATAGRAM frame on `connection` (docs/PROTOCOL.md
    /// §5.5): as `open`, but only for the session on that connection, and without moving its
    /// route (a control connection is not a UDP address).
    public mutating func openCarried(_ bytes: ByteBuffer, on connection: ConnectionID) -> Result<OpenedDatagram, RelayRejection> {
        guard let sessionId = SealedDatagram.sessionId(of: bytes) else {
            return .failure(RelayRejection(.unsealed, "\(bytes.readableBytes) bytes carried on \(connection)"))
        }
        guard let index = sessions.index(forKey: sessionId), inPlace(index, { $0.connection == connection }) else {
            return .failure(RelayRejection(.unknownSession, "session \(sessionId) carried on \(connection), which is not its connection"))
        }
        return open(bytes, at: index, from: nil)
    }

    private mutating func open(_ bytes: ByteBuffer, at index: Dictionary<UInt64, Session>.Index, from source: SocketAddress?) -> Result<
        OpenedDatagram, RelayRejection
    > {
        let sessionId = sessions.keys[index]
        return inPlace(index) { Self.open(bytes, with: &$0, sessionId: sessionId, from: source) }
    }

    private static func open(_ bytes: ByteBuffer, with session: inout Session, sessionId: UInt64, from source: SocketAddress?) -> Result<
        OpenedDatagram, RelayRejection
    > {
        do {
            let opened = try session.opener.open(bytes)
            var datagram = OpenedDatagram(user: session.user, sessionId: sessionId, payload: opened.payload, isNewest: opened.isNewest)
            if opened.isNewest, let source { datagram.routeMoved = follow(&session, to: source) }
            datagram.overControl = session.overControl
            datagram.connection = session.connection
            return .success(datagram)
        } catch {
            let origin = source.map { "from \($0)" } ?? "carried on \(session.connection)"
            return .failure(RelayRejection(error == .replayed ? .replayed : .badMAC, "session of \(session.user) \(origin)"))
        }
    }

    /// Reads or changes the session at `index` in place. Read through the dictionary's getter
    /// (`sessions.values[index].user`), every access copies the whole session, retaining and
    /// releasing its strings and keys: on the datagram path that was about 5 % of a forward.
    private mutating func inPlace<Value>(_ index: Dictionary<UInt64, Session>.Index, _ body: (inout Session) -> Value) -> Value {
        body(&sessions.values[index])
    }

    /// Sends session `id`'s datagrams over its control connection (`overControl`) or over UDP
    /// from now on; returns whether that changed anything.
    @discardableResult
    public mutating func carryDatagrams(ofSession id: UInt64, overControl: Bool) -> Bool {
        guard let index = sessions.index(forKey: id), inPlace(index, { $0.overControl != overControl }) else { return false }
        sessions.values[index].overControl = overControl
        countOverControl += overControl ? 1 : -1
        return true
    }

    /// Whether session `id`'s datagrams go over its control connection.
    public func carriesDatagramsOverControl(session id: UInt64) -> Bool { sessions[id]?.overControl ?? false }

    /// Seals `payload` for `user`'s one receiving session when content may go straight to it
    /// (`isSoleReceiver`), appends its delivery to `output` and returns that session's control
    /// connection; nil (nothing appended) otherwise. The relay's hot path: no allocation beyond
    /// the seal, and the delivery is appended where it is made (returned, it was copied once
    /// more on the way).
    public mutating func sealForSoleReceiver(_ payload: ByteBuffer, to user: String, into output: inout [RelayAction]) -> ConnectionID? {
        guard let entry = users[user], entry.hasSoleReceiver else { return nil }
        for id in entry.ids {
            guard let index = sessions.index(forKey: id) else { continue }
            let connection: ConnectionID? = inPlace(index) { session in
                guard session.receives else { return nil }
                output.append(Self.deliver(payload, from: &session))
                return session.connection
            }
            if let connection { return connection }
        }
        return nil
    }

    /// Seals `payload` for each of `user`'s sessions here (a receipt's fast copy: the session
    /// that sent the message takes it, the others ignore it), or with `receiversOnly` for each
    /// receiving session (a TYPING: every online device shows it).
    public mutating func sealForEverySession(_ payload: ByteBuffer, to user: String, receiversOnly: Bool = false, into output: inout [RelayAction]) {
        guard let ids = users[user]?.ids else { return }
        for id in ids {
            guard let index = sessions.index(forKey: id) else { continue }
            inPlace(index) { session in
                if !receiversOnly || session.receives { output.append(Self.deliver(payload, from: &session)) }
            }
        }
    }

    /// Encodes and seals `message` for `recipient`'s receiving session.
    public mutating func seal(_ message: SIMPMessage, for recipient: Recipient) -> RelayAction? {
        guard let id = receivingSession(of: recipient.user, device: recipient.device), let index = sessions.index(forKey: id) else { return nil }
        return inPlace(index) { Self.deliver(sealed: $0.sealer.seal(message), from: $0) }
    }

    /// Seals `payload` for `recipient`'s receiving session.
    public mutating func seal(_ payload: ByteBuffer, for recipient: Recipient) -> RelayAction? {
        guard let id = receivingSession(of: recipient.user, device: recipient.device), let index = sessions.index(forKey: id) else { return nil }
        return Self.deliver(payload, from: &sessions.values[index])
    }

    /// Encodes and seals `message` for session `id` (receiving or not), sent the session's way.
    public mutating func seal(_ message: SIMPMessage, forSession id: UInt64) -> RelayAction? {
        guard let index = sessions.index(forKey: id) else { return nil }
        return inPlace(index) { Self.deliver(sealed: $0.sealer.seal(message), from: $0) }
    }

    /// The relay's own sealed datagram for session `id` (a HELLO answer), without its route.
    public mutating func sealReply(_ message: SIMPMessage, forSession id: UInt64) -> ByteBuffer? {
        guard let index = sessions.index(forKey: id) else { return nil }
        return sessions.values[index].sealer.seal(message)
    }

    /// Whether session `id` may be told it is throttled now (at most every 100 ms).
    public mutating func admitThrottleNotice(forSession id: UInt64, now: NIODeadline) -> Bool {
        guard let index = sessions.index(forKey: id), inPlace(index, { $0.nextThrottleNotice <= now }) else { return false }
        sessions.values[index].nextThrottleNotice = now + .milliseconds(100)
        return true
    }

    private static func deliver(_ payload: ByteBuffer, from session: inout Session) -> RelayAction {
        deliver(sealed: session.sealer.seal(payload: payload), from: session)
    }

    /// A datagram sealed for `session` goes the session's way: UDP to its route, or a DATAGRAM
    /// frame on its control connection.
    private static func deliver(sealed: ByteBuffer, from session: Session) -> RelayAction {
        session.overControl ? .carry(session.connection, sealed) : .deliver(user: session.user, sealed, to: session.route.address)
    }

    /// Moves `session`'s route to `source` if it is a new, usable address; whether it moved.
    private static func follow(_ session: inout Session, to source: SocketAddress) -> Bool {
        guard session.route.address != source, let port = source.port, port > 0 else { return false }
        session.route.address = source
        return true
    }
}

/// One receiving device of a user: where the relay delivers stored messages.
public struct Recipient: Hashable, Sendable, CustomStringConvertible {
    public var user: String
    /// The device name ("" for the user's default device).
    public var device: String
    public init(user: String, device: String = "") {
        self.user = user
        self.device = device
    }

    public var description: String { device.isEmpty ? user : "\(user)/\(device)" }
}

/// A rejection decided by one part of the core: the reason and its log detail.
public struct RelayRejection: Error, Equatable, Sendable {
    public var reason: RejectReason
    public var detail: String
    public init(_ reason: RejectReason, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }

    public var action: RelayAction { .reject(reason, detail: detail) }
}
