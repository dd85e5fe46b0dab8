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

/// The relay's decisions, without I/O: which connection holds which user, where a datagram
/// goes, where a receipt goes, and when Redis must be asked or told.
///
/// The SwiftNIO relay feeds it decoded input and carries out the actions it returns; the loss
/// simulator drives the same type. Local sessions are authoritative; other users' routes come
/// from Redis through `lookupCompleted` and are cached for `routeCacheTTL`.
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
        /// Send datagram bytes unchanged to an address.
        case forward(ByteBuffer, to: SocketAddress)
        /// Store the user's registration in Redis, then call `registrationCompleted`.
        case register(user: String, route: Route, session: String, connection: ConnectionID)
        /// Remove the user's registration from Redis if it still names `session`.
        case unregister(user: String, session: String)
        /// The user's datagrams now come from a new port: rewrite its registration (if it still
        /// belongs to `session`) so every relay sends there.
        case moveRoute(user: String, route: Route, session: String)
        /// Ask Redis for the user's route, then call `lookupCompleted`.
        case lookup(user: String)
        /// Close a connection (after sending what was queued).
        case close(ConnectionID)
        /// Count and log rejected input.
        case reject(RejectReason, detail: String)
        /// Send a datagram the relay itself transmits (a stored message) to `user` at `address`.
        case sendDatagram(SIMPMessage, user: String, to: SocketAddress)
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

    private enum ConnectionState: Sendable {
        case awaitingConnect
        case registering(user: String)
        case connected(user: String)
    }

    struct LocalSession: Sendable {
        var connection: ConnectionID
        var route: Route
        var session: String
    }

    private struct CachedRoute: Sendable {
        var route: Route?
        /// Without a route: whether the user has registered before (offline, not unknown).
        var known: Bool
        var expires: NIODeadline
    }

    public private(set) var configuration: Configuration
    private var connections: [ConnectionID: ConnectionState] = [:]
    var sessions: [String: LocalSession] = [:]
    var inbox: InboxCore
    /// Presence subscriptions: watched user → local users who asked WHO about it.
    var watchers: [String: Set<String>] = [:]
    private var routeCache: [String: CachedRoute] = [:]
    private var awaitingLookup: [String: [ByteBuffer]] = [:]

    public init(configuration: Configuration) {
        self.configuration = configuration
        self.inbox = InboxCore(retransmit: configuration.inboxRetransmit, ttlMillis: configuration.inboxTTLMillis)
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

    /// A control connection opened.
    public mutating func connectionOpened(_ connection: ConnectionID) {
        connections[connection] = .awaitingConnect
    }

    /// A control connection closed: its registration is removed.
    public mutating func connectionClosed(_ connection: ConnectionID) -> [Action] {
        guard let state = connections.removeValue(forKey: connection) else { return [] }
        switch state {
        case .connected(let user), .registering(let user):
            guard let session = sessions[user], session.connection == connection else { return [] }
            sessions[user] = nil
            inbox.userLeft(user)
            return [.unregister(user: user, session: session.session), .recordPresence(user: user, online: false)]
        case .awaitingConnect:
            return []
        }
    }

    /// A decoded control frame arrived; `peer` is the connection's remote address.
    public mutating func controlReceived(_ message: SIMPMessage, on connection: ConnectionID, peer: SocketAddress, now: NIODeadline = .now()) -> [Action] {
        guard let state = connections[connection] else { return [] }
        guard message.version == SIMPMessage.currentVersion else {
            return [.reject(.unsupportedVersion, detail: "version \(message.version) on \(connection)"),
                    .send(connection, .error(.unsupportedVersion, "this relay speaks SIMP version \(SIMPMessage.currentVersion)", messageId: message.messageId))]
        }
        switch (message.kind, state) {
        case (.connect, .awaitingConnect):
            return connect(message, on: connection, peer: peer)
        case (.connect, _):
            return [.reject(.alreadyConnected, detail: "\(connection)"),
                    .send(connection, .error(.alreadyConnected, "this connection already has a session"))]
        case (.ping, _):
            var pong = SIMPMessage(kind: .pong, messageId: message.messageId)
            pong.time = message.time
            return [.send(connection, pong)]
        case (.pong, _):
            return []
        case (_, .awaitingConnect), (_, .registering):
            return [.reject(.notConnected, detail: "\(message.kind) on \(connection)"),
                    .send(connection, .error(.notConnected, "send CONNECT first", messageId: message.messageId))]
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
        guard case .registering(let user) = connections[connection] else {
            return [] // closed meanwhile; connectionClosed already unregistered it
        }
        guard succeeded else {
            connections[connection] = .awaitingConnect
            if sessions[user]?.connection == connection { sessions[user] = nil }
            return [.send(connection, .error(.internal, "registry unavailable, try again"))]
        }
        connections[connection] = .connected(user: user)
        var connected = SIMPMessage(kind: .connected, toUser: user)
        connected.udpPort = UInt32(configuration.udpPort)
        connected.relayId = configuration.relayId
        return [.send(connection, connected), .loadInbox(user: user), .recordPresence(user: user, online: true)]
    }

    private mutating func connect(_ message: SIMPMessage, on connection: ConnectionID, peer: SocketAddress) -> [Action] {
        let user = message.fromUser
        guard !user.isEmpty, message.udpPort > 0, message.udpPort <= 65535, peer.port != nil else {
            return [.reject(.missingField, detail: "CONNECT without user or UDP port on \(connection)"),
                    .send(connection, .error(.badRequest, "CONNECT needs fromUser and udpPort (1-65535)"))]
        }
        var address = peer
        address.port = Int(message.udpPort)
        var actions: [Action] = []
        if let previous = sessions[user] {
            // The newest session wins: the old connection is told and closed.
            connections[previous.connection] = .awaitingConnect
            actions += [.send(previous.connection, .error(.alreadyConnected, "\(user) connected again elsewhere")),
                        .close(previous.connection)]
        }
        let route = Route(address: address, relayId: configuration.relayId)
        let session = "\(configuration.relayId)/\(connection.rawValue)"
        sessions[user] = LocalSession(connection: connection, route: route, session: session)
        routeCache[user] = nil
        connections[connection] = .registering(user: user)
        actions.append(.register(user: user, route: route, session: session, connection: connection))
        return actions
    }

    private mutating func routeReceipt(_ receipt: SIMPMessage, from user: String, now: NIODeadline) -> [Action] {
        var receipt = receipt
        receipt.fromUser = user // the relay vouches for who sent the receipt
        if let stored = inbox.receipt(receipt, from: user, now: now) { return inboxActions(stored) }
        guard let sender = sessions[receipt.toUser] else {
            return [.reject(.receiptUnroutable, detail: "receipt from \(user) for \(receipt.toUser), who is not on this relay")]
        }
        return [.send(sender.connection, receipt)]
    }

    // MARK: Datagrams

    /// Where a datagram goes. The common case, a forward, needs no list of actions.
    public enum DatagramRoute: Sendable {
        /// Send the datagram's bytes unchanged to this address.
        case forward(to: SocketAddress)
        /// Anything else: rejections, an ERROR to the sender, a Redis lookup, a moved route (or
        /// nothing yet).
        case actions([Action])
    }

    /// A UDP datagram arrived from `source` (nil when unknown, e.g. in tests).
    public mutating func datagramReceived(_ bytes: ByteBuffer, from source: SocketAddress? = nil, now: NIODeadline) -> [Action] {
        switch routeDatagram(bytes, from: source, now: now) {
        case .forward(let address): return [.forward(bytes, to: address)]
        case .actions(let actions): return actions
        }
    }

    /// A UDP datagram arrived from `source`: the same decisions as `datagramReceived`, for the
    /// relay's hot path. Only the header is read (`DatagramHeader.parse`) unless the bytes need
    /// the full decoder.
    ///
    /// NAT rebinding: when a datagram from a locally connected user arrives from the IP of the
    /// user's control connection but another port, the user's route follows it (newest source
    /// wins). Only the port may change: datagrams are not authenticated yet, so an address on
    /// another host never moves a route.
    public mutating func routeDatagram(_ bytes: ByteBuffer, from source: SocketAddress? = nil, now: NIODeadline) -> DatagramRoute {
        let message: DatagramHeader
        do { message = try Self.header(of: bytes) } catch {
            return .actions([.reject(.malformed, detail: "datagram of \(bytes.readableBytes) bytes: \(error)")])
        }
        let moved = source.flatMap { followRebinding(of: message.fromUser, to: $0) } ?? []
        guard message.kind.isContent || message.kind == .typing else {
            // A PING datagram keeps the client's NAT mapping open (and may reveal a rebinding).
            if message.kind == .ping { return .actions(moved) }
            return .actions([.reject(.unexpectedKind, detail: "\(message.kind) datagram from \(message.fromUser)")])
        }
        let route = routeContent(bytes, message, now: now)
        guard !moved.isEmpty else { return route }
        switch route {
        case .forward(let address): return .actions(moved + [.forward(bytes, to: address)])
        case .actions(let actions): return .actions(moved + actions)
        }
    }

    /// Validates a content datagram and decides where it goes.
    private mutating func routeContent(_ bytes: ByteBuffer, _ message: DatagramHeader, now: NIODeadline) -> DatagramRoute {
        guard message.version == SIMPMessage.currentVersion else {
            return .actions([.reject(.unsupportedVersion, detail: "datagram version \(message.version)")]
                + tellSender(message, .unsupportedVersion, "this relay speaks SIMP version \(SIMPMessage.currentVersion)"))
        }
        guard !message.toUser.isEmpty, !message.fromUser.isEmpty, message.messageId != 0 else {
            return .actions([.reject(.missingField, detail: "datagram without fromUser, toUser or messageId")]
                + tellSender(message, .badRequest, "a message needs fromUser, toUser and messageId"))
        }
        if let local = sessions[message.toUser] {
            if !inbox.isIdle, message.kind != .typing,
               inbox.holdIfDelivering(bytes, messageId: message.messageId, to: message.toUser, from: message.fromUser) {
                return .actions([]) // stored messages from the same sender go first
            }
            return .forward(to: local.route.address)
        }
        if Self.isRoomAddress(message.toUser) {
            guard message.kind != .typing else { return .actions([]) } // typing is for one peer only
            return .actions(postToRoom(bytes, message))
        }
        if let cached = routeCache[message.toUser], cached.expires > now {
            guard let route = cached.route else { return .actions(noRoute(message, bytes: bytes, known: cached.known)) }
            return .forward(to: route.address)
        }
        return .actions(awaitRoute(bytes, for: message))
    }

    /// The routing fields of a datagram: read directly when possible, else fully decoded.
    private static func header(of bytes: ByteBuffer) throws -> DatagramHeader {
        if let header = DatagramHeader.parse(bytes) { return header }
        return DatagramHeader(try MessageCodec.decode(bytes))
    }

    /// Moves a local user's route to `source` if only its port changed.
    private mutating func followRebinding(of user: String, to source: SocketAddress) -> [Action]? {
        guard var session = sessions[user], session.route.address != source,
              session.route.address.ipAddress == source.ipAddress, let port = source.port, port > 0 else { return nil }
        session.route.address = source
        sessions[user] = session
        return [.moveRoute(user: user, route: session.route, session: session.session)]
    }

    /// Redis answered a `.lookup`: forwards the datagrams that waited for it. `known` says
    /// whether a user without a route has registered before (then it is offline, and its
    /// datagrams are dropped for their senders to retry, rather than refused as unknown).
    public mutating func lookupCompleted(user: String, route: Route?, known: Bool = false, now: NIODeadline) -> [Action] {
        let waiting = awaitingLookup.removeValue(forKey: user) ?? []
        let current = sessions[user]?.route ?? route
        routeCache[user] = CachedRoute(
            route: current, known: known,
            expires: now + (current == nil ? configuration.unknownUserCacheTTL : configuration.routeCacheTTL))
        guard let address = current?.address else {
            return waiting.flatMap { bytes in
                (try? Self.header(of: bytes)).map { noRoute($0, bytes: bytes, known: known) } ?? []
            }
        }
        return waiting.map { .forward($0, to: address) }
    }

    /// Redis could not be asked: the waiting datagrams are dropped, one count each (their
    /// senders retransmit).
    public mutating func lookupFailed(user: String) -> [Action] {
        let waiting = awaitingLookup.removeValue(forKey: user) ?? []
        return waiting.map { _ in .reject(.registryUnavailable, detail: "registry lookup for \(user) failed") }
    }

    private mutating func awaitRoute(_ bytes: ByteBuffer, for message: DatagramHeader) -> [Action] {
        if var queue = awaitingLookup[message.toUser] {
            guard queue.count < configuration.maxDatagramsAwaitingLookup else {
                return [.reject(.lookupBacklogFull, detail: "lookup backlog for \(message.toUser) full")]
            }
            queue.append(bytes)
            awaitingLookup[message.toUser] = queue
            return []
        }
        awaitingLookup[message.toUser] = [bytes]
        return [.lookup(user: message.toUser)]
    }

    /// A datagram whose recipient has no route: a user seen before is offline (the message
    /// goes to its inbox, see `storeOffline`), anyone else is unknown (the sender is told).
    private func noRoute(_ message: DatagramHeader, bytes: ByteBuffer, known: Bool) -> [Action] {
        guard message.kind != .typing else { return [] } // at most once: never stored, never refused
        guard !known else { return storeOffline(bytes, message) }
        return unknownRecipient(message)
    }

    private func unknownRecipient(_ message: DatagramHeader) -> [Action] {
        [.reject(.unknownRecipient, detail: "\(message.fromUser) -> \(message.toUser)")]
            + tellSender(message, .unknownRecipient, "no user \"\(message.toUser)\" is registered")
    }

    /// An ERROR to the sender of `message`, if the sender has a session here.
    func tellSender(_ message: DatagramHeader, _ code: SIMPMessage.ErrorCode, _ text: String) -> [Action] {
        guard let sender = sessions[message.fromUser] else { return [] }
        var error = SIMPMessage.error(code, text, messageId: message.messageId, to: message.fromUser)
        error.fromUser = message.toUser
        return [.send(sender.connection, error)]
    }
}
