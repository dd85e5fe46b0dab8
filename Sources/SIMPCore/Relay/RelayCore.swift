import NIOCore

/// The relay's decisions, without I/O: who may log in, which connection holds which session,
/// where a datagram or receipt goes, what is stored, and when timers fire.
///
/// It composes parts that each own their state: `ConnectionTable` (control connections, each
/// one's phase, liveness), `RelayLogin` (logins under way), `SessionTable` (sessions by id and
/// user, keys, addresses), `RouteTable` (routes to users elsewhere), `InboxCore` (stored messages on their
/// way), `PresenceCore` (presence followers). The shell feeds it input with the time, carries
/// out the `RelayAction`s it appends to `output`, answers its `.store` requests through
/// `storeAnswered`, and calls `tick` at `nextDeadline`. What happened that the shell only
/// reports (sessions connected and ended, messages stored) comes as `.event` actions. The
/// simulator drives the same type.
public struct RelayCore: Sendable {
    /// Settings that shape the relay's behaviour.
    public struct Configuration: Sendable {
        public var relayId: String
        /// The relay's UDP port, told to clients in CONNECTED (set by `listening`).
        public var udpPort: Int
        /// How long a route read from the store is trusted before the store is asked again.
        public var routeCacheTTL: TimeAmount = .seconds(2)
        /// How long "no such user" from the store is trusted.
        public var unknownUserCacheTTL: TimeAmount = .milliseconds(500)
        /// Payloads held per recipient while its route is being looked up.
        public var maxDatagramsAwaitingLookup = 256
        /// Whether users must log in (AUTH/CHALLENGE/proof). Off only for development: then
        /// anyone can claim any user.
        public var requireLogin = true
        /// Keys the decoy challenges for users that do not exist; every relay of a store must
        /// use the same one (the relay reads it from the store). Nil draws one from the core's
        /// entropy (tests, the simulator).
        public var decoySecret: [UInt8]?
        /// Whether users may log in with a password (AUTH/CHALLENGE); off, only access tokens log in.
        public var passwordLogin = true
        /// How access tokens are judged (docs/PROTOCOL.md §4.9); nil: the relay takes none.
        public var tokens: AccessTokenPolicy?
        /// How failed logins make a user name wait at an address, and at addresses it does not log in from.
        public var loginBackoff = FailedLogins.Policy()
        /// Content datagrams per user.
        public var messageLimit = Self.defaultMessageLimit
        /// File datagrams (FILE_CHUNK, FILE_ACK) per user: a budget of their own, so a file
        /// transfer never uses up the user's chat messages (docs/PROTOCOL.md §5.6).
        public var fileLimit = Self.defaultFileLimit
        /// The largest file the relay holds for an offline receiver (FILE_UPLOAD, docs/PROTOCOL.md
        /// §5.7), in bytes; 0: the relay holds no files. The per-user total and the retention are
        /// the store's (`--file-store-max-bytes-per-user`, `--file-store-retention`).
        public var maxHeldFileBytes = Self.defaultMaxHeldFileBytes
        /// New control connections per IP address.
        public var connectionLimit = Self.defaultConnectionLimit
        /// Login attempts (AUTH, or CONNECT without login) per IP address.
        public var loginLimit = Self.defaultLoginLimit
        /// Control connections open at once per IP address.
        public var maxConnectionsPerHost = Self.defaultMaxConnectionsPerHost
        /// PING a client silent for an interval; a client silent for `missLimit` intervals is dropped.
        public var heartbeat = HeartbeatPolicy.relay
        /// The login deadline, connections waiting for a login, and control request budgets.
        public var limits = RelayLimits()
        /// A third of the liveness record's TTL: the record is renewed ten times per interval
        /// (docs/PROTOCOL.md §7.2).
        public var refreshInterval: TimeAmount = .seconds(10)
        /// How often every registration of the relay is written again although nothing changed
        /// (a backstop for writes a Redis failover lost; docs/PROTOCOL.md §7.1).
        public var registrationSweepInterval: TimeAmount = .seconds(3600)
        /// How long a graceful shutdown waits for receipts of datagrams already forwarded.
        public var drainTimeout: TimeAmount = .seconds(5)
        /// The drain ends early once no receipt has been routed for this long.
        public var drainQuietPeriod: TimeAmount = .milliseconds(500)
        /// The largest datagram the relay accepts, told to clients in CONNECTED.
        public var maxDatagramSize = SealedDatagram.defaultMaxDatagramSize
        /// Which of the relays sharing one UDP port this is (`--threads`): its session ids are
        /// all ≡ `index` modulo `count`, so the kernel can steer each datagram to the relay
        /// holding its session by the id in its header.
        public var sessionIdClass = SessionIdClass(index: 0, count: 1)
        /// How long after CONNECTED a session's inbox is read if no datagram came from it
        /// (a client's HELLO starts the read at once).
        public var inboxStartDelay: TimeAmount = .seconds(1)
        /// How long after a failed inbox read the relay reads it again.
        public var inboxRetryDelay: TimeAmount = .seconds(1)

        /// The defaults of the limits above (also those of `simp-server`'s flags): bursts of
        /// two seconds' worth of messages, ten seconds' worth of connections and logins.
        public static let defaultMessageLimit = RateLimit(perSecond: 500, burst: 1000)
        public static let defaultConnectionLimit = RateLimit(perSecond: 100, burst: 1000)
        /// About 55 MB/s of 1,100-byte chunks, bursts of a fifth of a second.
        public static let defaultFileLimit = RateLimit(perSecond: 50_000, burst: 10_000)
        /// 100 MiB: the largest file held for an offline receiver unless the operator says otherwise.
        public static let defaultMaxHeldFileBytes: UInt64 = 100 << 20
        public static let defaultLoginLimit = RateLimit(perSecond: 5, burst: 50)
        public static let defaultMaxConnectionsPerHost = 2000
        /// How long a message may wait in an offline inbox, in milliseconds.
        public var inboxTTLMillis: Int64 = 7 * 24 * 3600 * 1000
        /// How the relay retransmits stored messages to a user who came back. At most
        /// `inboxWindow` ids of one sender are in flight to a device at once: a backlog of
        /// hundreds sent in one burst overflows the receiver's socket buffer, and the losses
        /// then cost retransmission rounds with growing timeouts.
        public var inboxRetransmit: RetransmitPolicy = {
            var policy = RetransmitPolicy()
            policy.maxIdSpan = Configuration.inboxWindow
            return policy
        }()
        /// Stored messages of one sender in flight to one device at most.
        public static let inboxWindow: UInt64 = 128

        public init(relayId: String, udpPort: Int) {
            self.relayId = relayId
            self.udpPort = udpPort
        }
    }

    /// The actions the core asks for (kept as a name for readers of `RelayCore.Action`).
    public typealias Action = RelayAction

    public private(set) var configuration: Configuration
    var entropy: Entropy
    var connections: ConnectionTable
    var login: RelayLogin
    var sessions = SessionTable()
    var routes: RouteTable
    var inbox: InboxCore
    var presence = PresenceCore()
    var messageRates: MessageRateLimiter<String>
    var fileRates: RateLimiter<String>
    var heldUploads: HeldUploads
    var budgets: RequestBudgets
    var timers: RelayTimers
    var tokens: TokenSessions

    /// A core with `entropy` as its only source of randomness (`.system` in production).
    public init(configuration: Configuration, entropy: Entropy, now: NIODeadline) {
        var entropy = entropy
        self.configuration = configuration
        self.login = RelayLogin(
            requireLogin: configuration.requireLogin, decoySecret: configuration.decoySecret ?? entropy.bytes(32),
            limit: configuration.loginLimit, backoff: configuration.loginBackoff)
        self.entropy = entropy
        self.connections = ConnectionTable(
            connectionLimit: configuration.connectionLimit, maxConnectionsPerHost: configuration.maxConnectionsPerHost,
            heartbeat: configuration.heartbeat, limits: configuration.limits)
        self.routes = RouteTable(
            cacheTTL: configuration.routeCacheTTL, unknownUserCacheTTL: configuration.unknownUserCacheTTL,
            maxAwaitingLookup: configuration.maxDatagramsAwaitingLookup,
            knownMemory: configuration.refreshInterval * 3)
        self.inbox = InboxCore(retransmit: configuration.inboxRetransmit, ttlMillis: configuration.inboxTTLMillis)
        self.messageRates = MessageRateLimiter(configuration.messageLimit)
        self.fileRates = RateLimiter(configuration.fileLimit)
        self.heldUploads = HeldUploads(instance: entropy.next())
        self.budgets = RequestBudgets(configuration.limits)
        self.timers = RelayTimers(configuration: configuration, now: now)
        self.tokens = TokenSessions(policy: configuration.tokens, now: now)
    }

    /// Users with a live session on this relay.
    public var connectedUsers: Int { sessions.count }
    /// Open control connections.
    public var openConnections: Int { connections.count }
    /// The registrations this relay keeps alive in the store.
    public var liveRegistrations: [Registration] { sessions.registrations }
    /// Sessions whose datagrams go over their control connection (docs/PROTOCOL.md §5.5).
    public var sessionsOverControl: Int { sessions.countOverControl }
    /// Sessions on this relay (a user may have several).
    public var sessionCount: Int { sessions.sessionCount }
    /// Whether session `id`'s datagrams go over its control connection.
    public func carriesDatagramsOverControl(session id: UInt64) -> Bool { sessions.carriesDatagramsOverControl(session: id) }
    /// Payloads held while their recipients' routes are looked up.
    public var datagramsAwaitingLookup: Int { routes.awaitingCount }
    /// Stored messages in flight to users who came back.
    public var inboxInFlight: Int { inbox.inFlightCount }
    /// Whether `user` has a session on this relay.
    public func isConnected(_ user: String) -> Bool { sessions.contains(user) }
    /// The registrations of `user`'s sessions on this relay.
    public func sessions(of user: String) -> [Registration] { sessions.registrations(of: user) }
    /// Whether a graceful shutdown has begun.
    public var isDraining: Bool { timers.isDraining }

    /// The relay's sockets are bound: CONNECTED reports `udpPort` from now on, and the relay
    /// announces itself (with `description`, its addresses) in the store at once.
    public mutating func listening(udpPort: Int, description: String, now: NIODeadline, into output: inout [RelayAction]) {
        configuration.udpPort = udpPort
        timers.listening(at: description)
        refresh(now: now, into: &output)
    }

    // MARK: Control channel

    /// A control connection opened from `peer`; an address that opens connections too fast
    /// (or holds too many, or too many not logged in) gets an ERROR and a close. When the relay
    /// holds its maximum of connections not logged in, the oldest of them is closed.
    public mutating func connectionOpened(_ connection: ConnectionID, peer: SocketAddress?, now: NIODeadline, into output: inout [RelayAction]) {
        let host = peer?.ipAddress ?? "unknown"
        let admission = connections.open(connection, host: host, now: now)
        if let evicted = admission.evict {
            let limit = configuration.limits.maxUnauthenticated
            connectionClosed(evicted, into: &output)
            output += [.reject(.unauthenticatedLimit, detail: "\(evicted) closed: \(limit) connections wait for a login"), .close(evicted)]
        }
        guard let wait = admission.refuse else { return }
        let what = admission.reason == .unauthenticatedLimit ? "connections that have not logged in" : "connections"
        output += [
            .reject(admission.reason, detail: "\(connection) from \(host)"),
            .send(connection, .loginRateLimited("too many \(what) from \(host)", retryAfter: wait)),
            .close(connection),
        ]
    }

    /// A control connection closed: its login is forgotten and its session ends.
    public mutating func connectionClosed(_ connection: ConnectionID, into output: inout [RelayAction]) {
        forgetConnection(connection, .connectionClosed, into: &output)
    }

    /// A decoded control frame arrived; `peer` is the connection's remote address.
    public mutating func controlReceived(
        _ message: SIMPMessage, on connection: ConnectionID, peer: SocketAddress, now: NIODeadline, into output: inout [RelayAction]
    ) {
        guard let phase = connections.phase(of: connection) else { return }
        connections.heard(connection, now: now)
        guard message.version == SIMPMessage.currentVersion else {
            output += [
                .reject(.unsupportedVersion, detail: "version \(message.version) on \(connection)"),
                .send(
                    connection,
                    .error(.unsupportedVersion, "this relay speaks SIMP version \(SIMPMessage.currentVersion)", messageId: message.messageId)),
            ]
            return
        }
        let start = output.count
        var budgeted = false
        if case .connected(let user, _) = phase, ControlRequestKind(message.kind) != nil {
            guard admitRequest(message, from: user, on: connection, now: now, into: &output) else { return }
            budgeted = true
        }
        defer { if budgeted { countWaiting(on: connection, in: &output, from: start) } }
        switch (message.kind, phase) {
        case (_, .closing):
            // Told to go (replaced, refused, the relay stopping) and about to close.
            output.append(.reject(.notConnected, detail: "\(message.kind) on \(connection), which is closing"))
        case (.ping, _):
            var pong = SIMPMessage(kind: .pong, messageId: message.messageId)
            pong.time = message.time
            output.append(.send(connection, pong))
        case (.pong, _):
            break
        case (.auth, .awaitingLogin) where !configuration.passwordLogin:
            output += [
                .reject(.authFailed, detail: "password login on \(connection): this relay takes only access tokens"),
                .send(connection, .error(.authFailed, "this relay takes only access tokens, not passwords: give --token-file or --token-command")),
                .close(connection),
            ]
        case (.connect, .awaitingLogin) where !message.token.isEmpty:
            tokenConnect(message, on: connection, peer: peer, now: now, into: &output)
        case (.auth, .awaitingLogin):
            let host = connections.host(of: connection) ?? "unknown"
            let step = login.auth(message, on: connection, host: host, now: now, entropy: &entropy)
            loginStep(step, on: connection, peer: peer, now: now, into: &output)
        case (.connect, .awaitingLogin):
            let host = connections.host(of: connection) ?? "unknown"
            let step = login.connect(message, on: connection, host: host, now: now, entropy: &entropy)
            loginStep(step, on: connection, peer: peer, connect: message, now: now, into: &output)
        case (.auth, _), (.connect, _):
            output += RelayLogin.alreadyLoggingIn(connection)
        case (_, .awaitingLogin), (_, .registering):
            output += [
                .reject(.notConnected, detail: "\(message.kind) on \(connection)"),
                .send(connection, .error(.notConnected, "log in first (AUTH, then CONNECT)", messageId: message.messageId)),
            ]
        case (.receipt, .connected(let user, _)):
            routeReceipt(message, from: user, on: connection, now: now, into: &output)
        case (.roomJoin, .connected(let user, _)), (.roomLeave, .connected(let user, _)), (.roomMembers, .connected(let user, _)):
            roomControl(message, from: user, on: connection, into: &output)
        case (.tokenRefresh, .connected(let user, _)):
            tokenRefresh(message, from: user, on: connection, now: now, into: &output)
        case (.read, .connected(let user, _)):
            routeRead(message, from: user, into: &output)
        case (.datagram, .connected) where message.datagram.count > configuration.maxDatagramSize:
            output.append(.reject(.datagramTooLarge, detail: "carried datagram of \(message.datagram.count) bytes on \(connection)"))
        case (.datagram, .connected):
            datagramCarried(ByteBuffer(bytes: message.datagram), on: connection, now: now, into: &output)
        case (.who, .connected(let user, _)):
            who(message, from: user, on: connection, into: &output)
        case (.keysPublish, .connected(let user, _)):
            publishKeys(message, from: user, on: connection, into: &output)
        case (.keysFetch, .connected(let user, _)):
            fetchKeys(message, from: user, on: connection, into: &output)
        case (.disconnect, .connected):
            forgetConnection(connection, .disconnected, into: &output)
            output.append(.close(connection))
        case (_, .connected):
            output += [
                .reject(.unexpectedKind, detail: "\(message.kind) on control channel of \(connection)"),
                .send(connection, .error(.badRequest, "\(message.kind) is not a control message", messageId: message.messageId)),
            ]
        }
    }

    /// A control frame could not be decoded. A frame of the original SIMP lineage (a `float`
    /// version) is told which version this relay speaks; anything else is malformed.
    public mutating func malformedControl(
        _ payload: ByteBuffer, on connection: ConnectionID, detail: String, now: NIODeadline, into output: inout [RelayAction]
    ) {
        connections.heard(connection, now: now)
        guard connections.phase(of: connection) != .closing else {
            return output.append(.reject(.malformed, detail: "\(connection), which is closing: \(detail)")) // not answered
        }
        if let lineage = LineageFrame.detect(payload) {
            output += [.reject(.unsupportedVersion, detail: "\(connection): \(lineage)"), .send(connection, lineage.answer)]
            return
        }
        output += [
            .reject(.malformed, detail: "\(connection): \(detail)"),
            .send(connection, .error(.badRequest, "malformed control frame")),
        ]
    }

    /// A peer announced a control frame above `limit` bytes: it is told, and the connection closes.
    public func frameTooLarge(on connection: ConnectionID, announced: Int, limit: Int, into output: inout [RelayAction]) {
        output += [
            .reject(.frameTooLarge, detail: "\(connection) announced \(announced) bytes"),
            .send(connection, .error(.frameTooLarge, "control frames are limited to \(limit) bytes")),
            .close(connection),
        ]
    }

    /// Carries out a login step; an accepted login starts the session (within the user's
    /// login budget).
    mutating func loginStep(
        _ step: RelayLogin.Step, on connection: ConnectionID, peer: SocketAddress, connect: SIMPMessage? = nil, now: NIODeadline,
        into output: inout [RelayAction]
    ) {
        switch step {
        case .actions(let actions):
            output += actions
        case .fetchVerifier(let user):
            output.append(.store(.fetchVerifier(user: user, connection: connection, host: connections.host(of: connection) ?? "unknown")))
        case .acceptedToken(let user, let secret, let connected, let connect, let peer, let expires):
            tokenAccepted(
                user, secret: secret, connected: connected, connect: connect, peer: peer, expires: expires, on: connection, now: now, into: &output)
        case .accepted(let user, let secret, var connected):
            if let success = login.success(user, from: connections.host(of: connection) ?? "unknown") {
                output.append(.store(.recordLogin(success)))
            }
            guard admitLogin(user, on: connection, now: now, into: &output) else { return }
            let keys = SessionKeys(sessionId: sessions.unusedSessionId(&entropy, in: configuration.sessionIdClass), secret: secret)
            connected.toUser = user
            connected.udpPort = UInt32(configuration.udpPort)
            connected.relayId = configuration.relayId
            connected.sessionId = keys.sessionId
            connected.maxDatagramSize = UInt32(configuration.maxDatagramSize)
            connected.batchReceipts = true
            // The per-user content rate, which clients pace under (docs/PROTOCOL.md §6.2).
            connected.messageRateLimit = UInt32(max(1, min(configuration.messageLimit.perSecond, Double(UInt32.max))).rounded(.down))
            beginSession(user, keys: keys, connected: connected, on: connection, peer: peer, connect: connect, now: now, into: &output)
        }
    }

    /// A control message for `user`'s sessions wherever they are: those here get it at once;
    /// if the user has none here, or also has sessions on other relays, it goes there through
    /// the store.
    mutating func routeControl(_ message: SIMPMessage, to user: String, now: NIODeadline, into output: inout [RelayAction]) {
        let local = sessions.connections(of: user)
        for connection in local { sendControl(message, to: connection, into: &output) }
        if local.isEmpty || sessions.isElsewhere(user) {
            routeRemote(.control(message), to: user, now: now, into: &output)
        }
    }

    /// A control message to each of `user`'s sessions here.
    func tell(_ user: String, _ message: SIMPMessage, into output: inout [RelayAction]) {
        var message = message
        message.toUser = user
        for connection in sessions.connections(of: user) { output.append(.send(connection, message)) }
    }

    /// A control message to session `session` (the one that sent what it is about).
    func tell(session: UInt64, _ message: SIMPMessage, into output: inout [RelayAction]) {
        guard let registration = sessions.registration(ofSession: session), let connection = sessions.connection(ofSession: session) else { return }
        var message = message
        message.toUser = registration.user
        output.append(.send(connection, message))
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
