import NIOCore

/// Identifies one control (TCP) connection on a relay.
public struct ConnectionID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    public var description: String { "c\(rawValue)" }
}

/// Why the relay dropped or refused input; each reason has its own counter.
public enum RejectReason: String, Sendable, CaseIterable {
    case malformed, unexpectedKind = "unexpected_kind", missingField = "missing_field"
    case unsupportedVersion = "unsupported_version", unknownRecipient = "unknown_recipient"
    case notConnected = "not_connected", alreadyConnected = "already_connected"
    case lookupBacklogFull = "lookup_backlog_full", registryUnavailable = "registry_unavailable"
    case receiptUnroutable = "receipt_unroutable"
    case frameTooLarge = "frame_too_large", datagramTooLarge = "datagram_too_large"
    case heartbeatTimeout = "heartbeat_timeout", recipientOffline = "recipient_offline"
    /// A datagram arrived while the relay was shutting down.
    case draining
    /// Login: wrong password or unknown user; CONNECT without login on a relay that requires it.
    case authFailed = "auth_failed", authRequired = "auth_required"
    /// Too many connections or login attempts from one address, or messages from one user.
    case connectionRateLimited = "connection_rate_limited", loginRateLimited = "login_rate_limited"
    case messageRateLimited = "message_rate_limited"
    /// Datagrams: not sealed, sealed for no live session, MAC wrong, counter replayed.
    case unsealed, unknownSession = "unknown_session", badMAC = "bad_mac", replayed
    /// A datagram whose `fromUser` is not its session's user.
    case senderMismatch = "sender_mismatch"
    /// A delivery published for another relay reached no subscriber (that relay is gone).
    case relayUnreachable = "relay_unreachable"
    /// Another relay handed over a delivery for a user who has no session here (it moved).
    case recipientNotHere = "recipient_not_here"
    /// Bytes on this relay's delivery channel were not a valid envelope.
    case badRelayDelivery = "bad_relay_delivery"
    /// A stored message was discarded: the receiver's inbox hit its cap.
    case inboxFull = "inbox_full"
    /// A stored message was discarded: it waited longer than the inbox TTL.
    case inboxExpired = "inbox_expired"
    /// A message for an offline user (or a room post) could not be stored (its sender retransmits).
    case inboxUnavailable = "inbox_unavailable"
    /// A room post or member list request from a user who is not a member of the room.
    case notAMember = "not_a_member"
}

/// A user's registration as the relay knows it.
public struct Route: Equatable, Sendable {
    public var address: SocketAddress
    /// The relay holding the user's session.
    public var relayId: String
    public init(address: SocketAddress, relayId: String) {
        self.address = address
        self.relayId = relayId
    }
}

/// The relay's decisions, without I/O: who may log in, which connection holds which user,
/// where a datagram goes, where a receipt goes, and when Redis must be asked or told.
///
/// The SwiftNIO relay feeds it decoded input and carries out the actions it returns; the loss
/// simulator drives the same type. Local sessions are authoritative; other users' routes come
/// from Redis through `lookupCompleted` and are cached for `routeCacheTTL`. Login is in
/// `RelayCore+Login.swift`, datagrams in `RelayCore+Datagrams.swift`.
public struct RelayCore: Sendable {
    /// Settings that shape the relay's behaviour.
    public struct Configuration: Sendable {
        public var relayId: String
        /// The relay's UDP port, told to clients in CONNECTED.
        public var udpPort: Int
        /// How long a route read from Redis is trusted before Redis is asked again.
        public var routeCacheTTL: TimeAmount = .seconds(2)
        /// How long "no such user" from Redis is trusted.
        public var unknownUserCacheTTL: TimeAmount = .milliseconds(500)
        /// Datagrams held per recipient while its route is being looked up.
        public var maxDatagramsAwaitingLookup = 256
        /// Whether users must log in (AUTH/CHALLENGE/proof). Off only for development: then
        /// anyone can claim any user.
        public var requireLogin = true
        /// Keys the decoy challenges for users that do not exist (stable per secret).
        public var decoySecret: [UInt8] = LoginCrypto.randomBytes(32)
        /// Content datagrams per user.
        public var messageLimit = Self.defaultMessageLimit
        /// New control connections per IP address.
        public var connectionLimit = Self.defaultConnectionLimit
        /// Login attempts (AUTH, or CONNECT without login) per IP address.
        public var loginLimit = Self.defaultLoginLimit
        /// Control connections open at once per IP address.
        public var maxConnectionsPerHost = Self.defaultMaxConnectionsPerHost
        /// The largest datagram the relay accepts, told to clients in CONNECTED.
        public var maxDatagramSize = SealedDatagram.defaultMaxDatagramSize

        /// The defaults of the limits above (also those of `simp-server`'s flags): bursts of
        /// two seconds' worth of messages, ten seconds' worth of connections and logins.
        public static let defaultMessageLimit = RateLimit(perSecond: 500, burst: 1000)
        public static let defaultConnectionLimit = RateLimit(perSecond: 100, burst: 1000)
        public static let defaultLoginLimit = RateLimit(perSecond: 5, burst: 50)
        public static let defaultMaxConnectionsPerHost = 2000
        /// How long a message may wait in an offline inbox, in milliseconds.
        public var inboxTTLMillis: Int64 = 7 * 24 * 3600 * 1000
        /// How the relay retransmits stored messages to a user who came back.
        public var inboxRetransmit = RetransmitPolicy()

        public init(relayId: String, udpPort: Int) {
            self.relayId = relayId
            self.udpPort = udpPort
        }
    }

    /// Something the shell must do.
    public enum Action: Sendable {
        /// Send a control message on a connection.
        case send(ConnectionID, SIMPMessage)
        /// Send a datagram, sealed for `user`'s session, to the user's registered `address`: the
        /// only way a datagram for a user leaves the relay, whether it came from a local sender
        /// or was handed over by another relay.
        case deliver(user: String, ByteBuffer, to: SocketAddress)
        /// Hand `delivery` to relay `relay` (Redis PUBLISH on its delivery channel), then call
        /// `deliveryUnheard` if no relay was listening.
        case publish(relay: String, RelayDelivery)
        /// Tell every relay that a user's session is now here (PUBLISH on `simp:relays:moves`).
        case announceMove(UserMove)
        /// Ask Redis whether `user`'s registration still names `session`; if not, call
        /// `sessionSuperseded`.
        case checkSession(user: String, session: String)
        /// Send the relay's own (sealed) datagram, e.g. the answer to a HELLO.
        case reply(ByteBuffer, to: SocketAddress)
        /// Read the user's password verifier from Redis, then call `verifierFetched`.
        case fetchVerifier(user: String, connection: ConnectionID)
        /// Store the user's registration in Redis, then call `registrationCompleted`.
        case register(user: String, route: Route, session: String, connection: ConnectionID)
        /// Remove the user's registration from Redis if it still names `session`.
        case unregister(user: String, session: String)
        /// The user's authenticated datagrams now come from a new address: rewrite its
        /// registration (if it still belongs to `session`).
        case moveRoute(user: String, route: Route, session: String)
        /// Ask Redis for the user's route, then call `lookupCompleted`.
        case lookup(user: String)
        /// Close a connection (after sending what was queued).
        case close(ConnectionID)
        /// Count and log rejected input.
        case reject(RejectReason, detail: String)
        /// Append `message` to `user`'s offline inbox (unless an entry with its dedupe key is
        /// there), then call `inboxStoreCompleted`.
        case storeInInbox(user: String, message: SIMPMessage)
        /// Read `user`'s inbox, oldest first, then call `inboxLoaded`.
        case loadInbox(user: String)
        /// Remove this entry from `user`'s inbox.
        case removeFromInbox(user: String, entry: InboxEntry)
        /// Carry out a room join, leave or member list in Redis, then call `roomAnswered`.
        case roomRequest(RoomRequest)
        /// If the author is a member of `room`, number the post (once per author and messageId)
        /// and read the members, then call `roomPosted`.
        case postToRoom(room: String, message: SIMPMessage)
        /// A member receipted room copy `copy`: count the member once per post in Redis, then
        /// call `roomDeliveryCounted`.
        case countRoomDelivery(copy: SIMPMessage)
        /// Record `user`'s presence in Redis, read the members of its rooms, then call
        /// `presenceRecorded`.
        case recordPresence(user: String, online: Bool)
        /// Read the presence of the request's users (or room members) from Redis, then call
        /// `whoAnswered`.
        case who(WhoRequest)
    }

    enum ConnectionState: Sendable {
        case awaitingLogin
        case fetchingVerifier(user: String, clientNonce: [UInt8])
        /// CHALLENGE sent; `verifier` is nil on a relay that does not authenticate.
        case challenged(LoginTranscript, verifier: PasswordVerifier?)
        case registering(user: String, connected: SIMPMessage)
        case connected(user: String)
    }

    struct Connection: Sendable {
        var state: ConnectionState = .awaitingLogin
        /// The peer's IP address (rate limits are per address).
        var host: String
    }

    struct LocalSession: Sendable {
        var connection: ConnectionID
        var route: Route
        /// The registration's owner token in Redis.
        var session: String
        var opener: DatagramOpener
        var sealer: DatagramSealer
        /// When the user may next be told it is throttled.
        var nextThrottleNotice: NIODeadline = .uptimeNanoseconds(0)
    }

    struct CachedRoute: Sendable {
        var route: Route?
        /// Without a route: whether the user has registered before (offline, not unknown).
        var known: Bool
        var expires: NIODeadline
    }

    public internal(set) var configuration: Configuration
    var connections: [ConnectionID: Connection] = [:]
    var connectionsPerHost: [String: Int] = [:]
    var sessions: [String: LocalSession] = [:]
    /// Session id → user, for sealed datagrams.
    var usersBySessionId: [UInt64: String] = [:]
    var routeCache: [String: CachedRoute] = [:]
    /// Payloads (datagrams and receipts) waiting for their recipient's route.
    var awaitingLookup: [String: [RelayDelivery.Payload]] = [:]
    var connectionRates: RateLimiter<String>
    var loginRates: RateLimiter<String>
    var messageRates: RateLimiter<String>
    /// Stored messages on their way to users who came back (the relay as their sender).
    var inbox: InboxCore
    /// Presence subscriptions: watched user → local users who asked WHO about it.
    var watchers: [String: Set<String>] = [:]

    public init(configuration: Configuration) {
        self.configuration = configuration
        self.inbox = InboxCore(retransmit: configuration.inboxRetransmit, ttlMillis: configuration.inboxTTLMillis)
        self.connectionRates = RateLimiter(configuration.connectionLimit)
        self.loginRates = RateLimiter(configuration.loginLimit)
        self.messageRates = RateLimiter(configuration.messageLimit)
    }

    /// The relay's UDP socket is bound (with port 0, only then is its port known): CONNECTED
    /// reports `port` from now on.
    public mutating func udpPortBound(_ port: Int) {
        configuration.udpPort = port
    }

    /// Users with a live session on this relay.
    public var connectedUsers: Int { sessions.count }
    /// The registrations this relay must keep alive in Redis: user, route and session token.
    public var liveRegistrations: [(user: String, route: Route, session: String)] {
        sessions.map { ($0.key, $0.value.route, $0.value.session) }
    }
    /// Datagrams held while their recipients' routes are looked up.
    public var datagramsAwaitingLookup: Int { awaitingLookup.values.reduce(0) { $0 + $1.count } }
    /// Whether `user` has a session on this relay.
    public func isConnected(_ user: String) -> Bool { sessions[user] != nil }

    // MARK: Control channel

    /// A control connection opened from `peer`. Returns what to do when the peer's address
    /// opens connections too fast (an ERROR and a close), else nothing.
    @discardableResult
    public mutating func connectionOpened(_ connection: ConnectionID, peer: SocketAddress? = nil, now: NIODeadline = .now()) -> [Action] {
        let host = peer?.ipAddress ?? "unknown"
        connections[connection] = Connection(host: host)
        connectionsPerHost[host, default: 0] += 1
        let wait = connectionsPerHost[host]! > configuration.maxConnectionsPerHost
            ? .seconds(1) : connectionRates.admit(host, now: now)
        guard let wait else { return [] }
        return [.reject(.connectionRateLimited, detail: "\(connection) from \(host)"),
                .send(connection, .rateLimited("too many connections from \(host)", retryAfter: wait)),
                .close(connection)]
    }

    /// A control connection closed: its registration is removed.
    public mutating func connectionClosed(_ connection: ConnectionID) -> [Action] {
        guard let closed = connections.removeValue(forKey: connection) else { return [] }
        connectionsPerHost[closed.host, default: 1] -= 1
        if connectionsPerHost[closed.host] == 0 { connectionsPerHost[closed.host] = nil }
        switch closed.state {
        case .connected(let user), .registering(let user, _):
            guard let session = sessions[user], session.connection == connection else { return [] }
            endSession(of: user)
            return [.unregister(user: user, session: session.session), .recordPresence(user: user, online: false)]
        case .awaitingLogin, .fetchingVerifier, .challenged:
            return []
        }
    }

    /// A decoded control frame arrived; `peer` is the connection's remote address.
    public mutating func controlReceived(
        _ message: SIMPMessage, on connection: ConnectionID, peer: SocketAddress, now: NIODeadline = .now()
    ) -> [Action] {
        guard let state = connections[connection]?.state else { return [] }
        guard message.version == SIMPMessage.currentVersion else {
            return [.reject(.unsupportedVersion, detail: "version \(message.version) on \(connection)"),
                    .send(connection, .error(.unsupportedVersion, "this relay speaks SIMP version \(SIMPMessage.currentVersion)", messageId: message.messageId))]
        }
        switch (message.kind, state) {
        case (.auth, .awaitingLogin):
            return startLogin(message, on: connection, now: now)
        case (.connect, .awaitingLogin), (.connect, .challenged):
            return finishLogin(message, on: connection, peer: peer, now: now)
        case (.auth, _), (.connect, _):
            return [.reject(.alreadyConnected, detail: "\(connection)"),
                    .send(connection, .error(.alreadyConnected, "this connection already has a session or a login under way"))]
        case (.ping, _):
            var pong = SIMPMessage(kind: .pong, messageId: message.messageId)
            pong.time = message.time
            return [.send(connection, pong)]
        case (.pong, _):
            return []
        case (_, .awaitingLogin), (_, .fetchingVerifier), (_, .challenged), (_, .registering):
            return [.reject(.notConnected, detail: "\(message.kind) on \(connection)"),
                    .send(connection, .error(.notConnected, "log in first (AUTH, then CONNECT)", messageId: message.messageId))]
        case (.receipt, .connected(let user)):
            return routeReceipt(message, from: user, now: now)
        case (.roomJoin, .connected(let user)), (.roomLeave, .connected(let user)), (.roomMembers, .connected(let user)):
            return roomControl(message, from: user, on: connection)
        case (.read, .connected(let user)):
            return routeRead(message, from: user)
        case (.who, .connected(let user)):
            return who(message, from: user, on: connection)
        case (.disconnect, .connected):
            return connectionClosed(connection) + [.close(connection)]
        case (_, .connected):
            return [.reject(.unexpectedKind, detail: "\(message.kind) on control channel of \(connection)"),
                    .send(connection, .error(.badRequest, "\(message.kind) is not a control message", messageId: message.messageId))]
        }
    }

    /// A control frame could not be decoded.
    public mutating func malformedControl(on connection: ConnectionID, detail: String) -> [Action] {
        [.reject(.malformed, detail: "\(connection): \(detail)"),
         .send(connection, .error(.badRequest, "malformed control frame"))]
    }

    /// Redis answered the `.register` action for `connection`.
    public mutating func registrationCompleted(_ connection: ConnectionID, succeeded: Bool) -> [Action] {
        guard case .registering(let user, let connected) = connections[connection]?.state else {
            return [] // closed meanwhile; connectionClosed already unregistered it
        }
        guard succeeded else {
            connections[connection]?.state = .awaitingLogin
            if sessions[user]?.connection == connection { endSession(of: user) }
            return [.send(connection, .error(.internal, "registry unavailable, try again"))]
        }
        connections[connection]?.state = .connected(user: user)
        return [.send(connection, connected), .announceMove(UserMove(user: user, relayId: configuration.relayId)),
                .loadInbox(user: user), .recordPresence(user: user, online: true)]
    }

    /// Starts `user`'s session on `connection` with `keys`; the CONNECTED to send once Redis
    /// has the registration is `connected`. A previous session of the user is told and closed.
    mutating func beginSession(
        _ user: String, keys: SessionKeys, connected: SIMPMessage, on connection: ConnectionID, peer: SocketAddress, udpPort: Int
    ) -> [Action] {
        var address = peer
        address.port = udpPort
        var actions: [Action] = []
        if let previous = sessions[user] {
            // The newest session wins: the old connection is told and closed.
            connections[previous.connection]?.state = .awaitingLogin
            endSession(of: user)
            actions += [.send(previous.connection, .error(.alreadyConnected, "\(user) connected again elsewhere")),
                        .close(previous.connection)]
        }
        let route = Route(address: address, relayId: configuration.relayId)
        let session = "\(configuration.relayId)/\(connection.rawValue)"
        sessions[user] = LocalSession(
            connection: connection, route: route, session: session,
            opener: DatagramOpener(keys: keys, direction: .uplink), sealer: DatagramSealer(keys: keys, direction: .downlink))
        usersBySessionId[keys.sessionId] = user
        routeCache[user] = nil
        connections[connection]?.state = .registering(user: user, connected: connected)
        actions.append(.register(user: user, route: route, session: session, connection: connection))
        return actions
    }

    mutating func endSession(of user: String) {
        guard let session = sessions.removeValue(forKey: user) else { return }
        usersBySessionId[session.opener.sessionId] = nil
        inbox.userLeft(user)
    }

    /// A session id no live session uses.
    func newSessionId() -> UInt64 {
        while true {
            let id = UInt64.random(in: 1 ... .max)
            if usersBySessionId[id] == nil { return id }
        }
    }

    private mutating func routeReceipt(_ receipt: SIMPMessage, from user: String, now: NIODeadline) -> [Action] {
        var receipt = receipt
        receipt.fromUser = user // the relay vouches for who sent the receipt
        if let stored = inbox.receipt(receipt, from: user, now: now) { return inboxActions(stored) }
        if let sender = sessions[receipt.toUser] {
            return [.send(sender.connection, receipt)]
        }
        guard !receipt.toUser.isEmpty else {
            return [.reject(.receiptUnroutable, detail: "receipt from \(user) without toUser")]
        }
        // The sender is on another relay: the receipt goes there through Redis.
        return routeRemote(.control(receipt), to: receipt.toUser, now: now)
    }
}

extension SIMPMessage {
    /// An ERROR RATE_LIMITED telling when trying again may succeed.
    public static func rateLimited(_ text: String, retryAfter: TimeAmount, messageId: UInt64 = 0, to user: String = "") -> SIMPMessage {
        var error = SIMPMessage.error(.rateLimited, text, messageId: messageId, to: user)
        error.retryAfterMillis = UInt32(clamping: max(1, retryAfter.nanoseconds / 1_000_000))
        return error
    }
}
