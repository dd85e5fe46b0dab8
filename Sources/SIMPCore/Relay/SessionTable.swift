import NIOCore

/// The relay's logged-in sessions, keyed by session id: whose each one is, its control
/// connection, its UDP route and its datagram keys. A user has at most one session here.
public struct SessionTable: Sendable {
    struct Session: Sendable {
        var user: String
        var connection: ConnectionID
        var route: Route
        /// The registration's owner token in the store.
        var token: String
        var opener: DatagramOpener
        var sealer: DatagramSealer
        /// When the user may next be told it is throttled.
        var nextThrottleNotice: NIODeadline = .uptimeNanoseconds(0)
    }

    /// An authentic datagram: whose session sealed it, and what it carried.
    public struct OpenedDatagram: Sendable, Equatable {
        public var user: String
        public var payload: ByteBuffer
        /// Whether it carries the session's highest counter so far (its source may move the route).
        public var isNewest: Bool
        /// The session's new registration when this, its newest authentic datagram, came from a
        /// new address (NAT rebinding, roaming): the route moved there.
        public var moved: Registration?
    }

    private var sessions: [UInt64: Session] = [:]
    private var sessionIds: [String: UInt64] = [:]

    public init() {}

    /// Users with a session.
    public var count: Int { sessions.count }
    public func contains(_ user: String) -> Bool { sessionIds[user] != nil }
    /// The control connection of `user`'s session.
    public func connection(of user: String) -> ConnectionID? { sessionIds[user].flatMap { sessions[$0]?.connection } }
    /// The registration of `user`'s session.
    public func registration(of user: String) -> Registration? {
        sessionIds[user].flatMap { sessions[$0] }.map { Registration(user: $0.user, route: $0.route, session: $0.token) }
    }
    /// Every session's registration, by user (a stable order: a seeded run replays exactly).
    public var registrations: [Registration] {
        sessions.values.map { Registration(user: $0.user, route: $0.route, session: $0.token) }.sorted { $0.user < $1.user }
    }

    /// The user whose session has id `sessionId`.
    public func user(ofSession sessionId: UInt64) -> String? { sessions[sessionId]?.user }

    /// A session id no live session uses.
    public func unusedSessionId(_ entropy: inout Entropy) -> UInt64 {
        while true {
            let id = entropy.next()
            if id != 0, sessions[id] == nil { return id }
        }
    }

    /// Starts a session for `user`; returns the user's previous session's connection, which
    /// the newest session replaces.
    public mutating func start(
        _ user: String, keys: SessionKeys, route: Route, token: String, on connection: ConnectionID
    ) -> ConnectionID? {
        let previous = self.connection(of: user)
        end(user)
        sessions[keys.sessionId] = Session(
            user: user, connection: connection, route: route, token: token,
            opener: DatagramOpener(keys: keys, direction: .uplink), sealer: DatagramSealer(keys: keys, direction: .downlink))
        sessionIds[user] = keys.sessionId
        return previous
    }

    /// Ends `user`'s session; returns its registration (nil if it had none).
    @discardableResult
    public mutating func end(_ user: String) -> Registration? {
        guard let id = sessionIds.removeValue(forKey: user), let session = sessions.removeValue(forKey: id) else { return nil }
        return Registration(user: session.user, route: session.route, session: session.token)
    }

    /// Ends every session; returns their registrations.
    public mutating func endAll() -> [Registration] {
        defer { sessions.removeAll(); sessionIds.removeAll() }
        return registrations
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
        do {
            let opened = try sessions.values[index].opener.open(bytes)
            let moved = opened.isNewest ? Self.follow(&sessions.values[index], to: source) : nil
            return .success(OpenedDatagram(user: sessions.values[index].user, payload: opened.payload, isNewest: opened.isNewest, moved: moved))
        } catch {
            return .failure(RelayRejection(error == .replayed ? .replayed : .badMAC, "session of \(sessions.values[index].user) from \(source)"))
        }
    }

    /// Seals `payload` for `user`'s session; nil when the user has no session here.
    public mutating func seal(_ payload: ByteBuffer, for user: String) -> RelayAction? {
        withSession(of: user) { .deliver(user: user, $0.sealer.seal(payload: payload), to: $0.route.address) }
    }

    /// Encodes and seals `message` for `user`'s session.
    public mutating func seal(_ message: SIMPMessage, for user: String) -> RelayAction? {
        withSession(of: user) { .deliver(user: user, $0.sealer.seal(message), to: $0.route.address) }
    }

    /// The relay's own sealed datagram for `user` (a HELLO answer), without its route.
    public mutating func sealReply(_ message: SIMPMessage, for user: String) -> ByteBuffer? {
        withSession(of: user) { $0.sealer.seal(message) }
    }

    /// Moves `user`'s route to `source`; returns the new registration if it changed.
    public mutating func follow(_ user: String, to source: SocketAddress) -> Registration? {
        withSession(of: user) { Self.follow(&$0, to: source) } ?? nil
    }

    /// Whether `user` may be told it is throttled now (at most every 100 ms).
    public mutating func admitThrottleNotice(for user: String, now: NIODeadline) -> Bool {
        withSession(of: user) { session in
            guard session.nextThrottleNotice <= now else { return false }
            session.nextThrottleNotice = now + .milliseconds(100)
            return true
        } ?? false
    }

    /// Runs `body` on `user`'s session in place (one lookup by user, one by index, no copy).
    private mutating func withSession<T>(of user: String, _ body: (inout Session) -> T) -> T? {
        guard let id = sessionIds[user], let index = sessions.index(forKey: id) else { return nil }
        return body(&sessions.values[index])
    }

    /// Moves `session`'s route to `source` if it is a new, usable address.
    private static func follow(_ session: inout Session, to source: SocketAddress) -> Registration? {
        guard session.route.address != source, let port = source.port, port > 0 else { return nil }
        session.route.address = source
        return Registration(user: session.user, route: session.route, session: session.token)
    }
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
