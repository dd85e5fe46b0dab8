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
    /// A delivery published for another relay reached no subscriber (that relay is gone).
    case relayUnreachable = "relay_unreachable"
    /// Another relay handed over a delivery for a user who has no session here (it moved).
    case recipientNotHere = "recipient_not_here"
    /// Bytes on this relay's delivery channel were not a valid envelope.
    case badRelayDelivery = "bad_relay_delivery"
    /// A datagram arrived while the relay was shutting down.
    case draining
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

        public init(relayId: String, udpPort: Int) {
            self.relayId = relayId
            self.udpPort = udpPort
        }
    }

    /// Something the shell must do.
    public enum Action: Sendable {
        /// Send a control message on a connection.
        case send(ConnectionID, SIMPMessage)
        /// Send datagram bytes to `user`, who has a session on this relay, at its registered
        /// `address`: the only way a datagram leaves the relay, whether it came from a local
        /// sender or was handed over by another relay.
        case deliver(user: String, ByteBuffer, to: SocketAddress)
        /// Hand `delivery` to relay `relay` (Redis PUBLISH on its delivery channel), then call
        /// `deliveryUnheard` if no relay was listening.
        case publish(relay: String, RelayDelivery)
        /// Tell every relay that a user's session is now here (PUBLISH on `simp:moves`).
        case announceMove(UserMove)
        /// Ask Redis whether `user`'s registration still names `session`; if not, call
        /// `sessionSuperseded`.
        case checkSession(user: String, session: String)
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
    }

    enum ConnectionState: Sendable {
        case awaitingConnect
        case registering(user: String)
        case connected(user: String)
    }

    struct LocalSession: Sendable {
        var connection: ConnectionID
        var route: Route
        var session: String
    }

    struct CachedRoute: Sendable {
        var route: Route?
        /// Without a route: whether the user has registered before (offline, not unknown).
        var known: Bool
        var expires: NIODeadline
    }

    public private(set) var configuration: Configuration
    var connections: [ConnectionID: ConnectionState] = [:]
    var sessions: [String: LocalSession] = [:]
    var routeCache: [String: CachedRoute] = [:]
    /// Datagrams and receipts waiting for their recipient's route.
    var awaitingLookup: [String: [RelayDelivery.Payload]] = [:]

    public init(configuration: Configuration) { self.configuration = configuration }

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
            return [.unregister(user: user, session: session.session)]
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
        return [.send(connection, connected), .announceMove(UserMove(user: user, relayId: configuration.relayId))]
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
        if let sender = sessions[receipt.toUser] {
            return [.send(sender.connection, receipt)]
        }
        guard !receipt.toUser.isEmpty else {
            return [.reject(.receiptUnroutable, detail: "receipt from \(user) without toUser")]
        }
        // The sender is on another relay: the receipt goes there through Redis.
        return routeRemote(.control(receipt), to: receipt.toUser, now: now)
    }

    // MARK: Datagrams

    /// Where a datagram goes. The common case, a local recipient, needs no list of actions.
    public enum DatagramRoute: Sendable {
        /// Deliver the datagram's bytes to `user`, who has a session here, at `address`
        /// (as `Action.deliver`).
        case deliver(user: String, to: SocketAddress)
        /// Anything else: rejections, an ERROR to the sender, a Redis lookup, a moved route (or
        /// nothing yet).
        case actions([Action])
    }

    /// A UDP datagram arrived from `source` (nil when unknown, e.g. in tests).
    public mutating func datagramReceived(_ bytes: ByteBuffer, from source: SocketAddress? = nil, now: NIODeadline) -> [Action] {
        switch routeDatagram(bytes, from: source, now: now) {
        case .deliver(let user, let address): return [.deliver(user: user, bytes, to: address)]
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
        guard message.kind.isContent else {
            // A PING datagram keeps the client's NAT mapping open (and may reveal a rebinding).
            if message.kind == .ping { return .actions(moved) }
            return .actions([.reject(.unexpectedKind, detail: "\(message.kind) datagram from \(message.fromUser)")])
        }
        let route = routeContent(bytes, message, now: now)
        guard !moved.isEmpty else { return route }
        switch route {
        case .deliver(let user, let address): return .actions(moved + [.deliver(user: user, bytes, to: address)])
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
            return .deliver(user: message.toUser, to: local.route.address)
        }
        return .actions(routeRemote(.datagram(bytes), to: message.toUser, now: now))
    }

    /// The routing fields of a datagram: read directly when possible, else fully decoded.
    static func header(of bytes: ByteBuffer) throws -> DatagramHeader {
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
        if sessions[user] != nil {
            return waiting.flatMap { deliverToLocalUser(RelayDelivery(user: user, payload: $0)) }
        }
        let cached = CachedRoute(
            route: route, known: known,
            expires: now + (route == nil ? configuration.unknownUserCacheTTL : configuration.routeCacheTTL))
        routeCache[user] = cached
        return waiting.flatMap { dispatch($0, to: user, via: cached) }
    }

    /// Redis could not be asked: the waiting datagrams are dropped, one count each (their
    /// senders retransmit).
    public mutating func lookupFailed(user: String) -> [Action] {
        let waiting = awaitingLookup.removeValue(forKey: user) ?? []
        return waiting.map { _ in .reject(.registryUnavailable, detail: "registry lookup for \(user) failed") }
    }

    mutating func awaitRoute(_ payload: RelayDelivery.Payload, for user: String) -> [Action] {
        if var queue = awaitingLookup[user] {
            guard queue.count < configuration.maxDatagramsAwaitingLookup else {
                return [.reject(.lookupBacklogFull, detail: "lookup backlog for \(user) full")]
            }
            queue.append(payload)
            awaitingLookup[user] = queue
            return []
        }
        awaitingLookup[user] = [payload]
        return [.lookup(user: user)]
    }

    /// A datagram whose recipient has no route: a user seen before is offline (dropped and
    /// counted; the sender's retransmissions reach it once it is back, e.g. after a relay
    /// restart), anyone else is unknown (the sender is told).
    func noRoute(_ message: DatagramHeader, known: Bool) -> [Action] {
        guard !known else {
            return [.reject(.recipientOffline, detail: "\(message.fromUser) -> \(message.toUser)")]
        }
        return unknownRecipient(message)
    }

    private func unknownRecipient(_ message: DatagramHeader) -> [Action] {
        [.reject(.unknownRecipient, detail: "\(message.fromUser) -> \(message.toUser)")]
            + tellSender(message, .unknownRecipient, "no user \"\(message.toUser)\" is registered")
    }

    /// An ERROR to the sender of `message`, if the sender has a session here.
    private func tellSender(_ message: DatagramHeader, _ code: SIMPMessage.ErrorCode, _ text: String) -> [Action] {
        guard let sender = sessions[message.fromUser] else { return [] }
        var error = SIMPMessage.error(code, text, messageId: message.messageId, to: message.fromUser)
        error.fromUser = message.toUser
        return [.send(sender.connection, error)]
    }
}
