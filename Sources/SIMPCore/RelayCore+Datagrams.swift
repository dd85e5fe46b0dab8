import NIOCore

/// The data path (docs/PROTOCOL.md §5): every datagram is sealed for its sender's session;
/// the relay opens it (MAC, replay window), checks that `fromUser` is the session's user,
/// limits the user's rate, and seals the payload again for the recipient's session.
extension RelayCore {
    /// Where a datagram goes. The common case, a forward, needs no list of actions.
    public enum DatagramRoute: Sendable {
        /// Send these bytes, sealed for `user`, to this address (as `Action.deliver`).
        case deliver(user: String, ByteBuffer, to: SocketAddress)
        /// Anything else: rejections, an ERROR to the sender, a Redis lookup, a moved route, a
        /// HELLO answer (or nothing yet).
        case actions([Action])
    }

    /// A UDP datagram arrived from `source`.
    public mutating func datagramReceived(_ bytes: ByteBuffer, from source: SocketAddress, now: NIODeadline) -> [Action] {
        switch routeDatagram(bytes, from: source, now: now) {
        case .deliver(let user, let sealed, let address): return [.deliver(user: user, sealed, to: address)]
        case .actions(let actions): return actions
        }
    }

    /// A UDP datagram arrived from `source`: the same decisions as `datagramReceived`, for the
    /// relay's hot path. Only the payload's routing header is read (`DatagramHeader.parse`)
    /// unless the bytes need the full decoder.
    ///
    /// Addresses follow authentic traffic: when the newest authentic datagram of a session (the
    /// highest counter so far) comes from a new source, the user's route moves there (NAT
    /// rebinding, roaming). Forged, replayed or older datagrams never move it.
    public mutating func routeDatagram(_ bytes: ByteBuffer, from source: SocketAddress, now: NIODeadline) -> DatagramRoute {
        guard let sessionId = SealedDatagram.sessionId(of: bytes) else {
            return .actions([.reject(.unsealed, detail: "\(bytes.readableBytes) bytes from \(source)")])
        }
        guard let user = usersBySessionId[sessionId] else {
            return .actions([.reject(.unknownSession, detail: "session \(sessionId) from \(source)")])
        }
        let opened: DatagramOpener.Opened
        do { opened = try sessions[user]!.opener.open(bytes) } catch {
            let reason: RejectReason = error == .replayed ? .replayed : .badMAC
            return .actions([.reject(reason, detail: "session of \(user) from \(source)")])
        }
        let header: DatagramHeader
        do { header = try Self.header(of: opened.payload) } catch {
            return .actions([.reject(.malformed, detail: "payload of \(opened.payload.readableBytes) bytes from \(user): \(error)")])
        }
        let moved = opened.isNewest ? follow(user, to: source) : []
        switch header.kind {
        case .hello:
            return .actions(moved + [.reply(seal(SIMPMessage(kind: .hello, toUser: user), for: user), to: source)])
        case .ping:
            return .actions(moved) // a keepalive: keeps the NAT mapping open
        case .receipt:
            return Self.merge(moved, routeReceiptDatagram(opened.payload, header, from: user))
        case let kind where kind.isContent || kind == .typing:
            return Self.merge(moved, routeContent(opened.payload, header, from: user, now: now))
        default:
            return .actions(moved + [.reject(.unexpectedKind, detail: "\(header.kind) datagram from \(user)")])
        }
    }

    /// `actions` (a moved route) before `route`, keeping the action-free fast path when there are none.
    private static func merge(_ actions: [Action], _ route: DatagramRoute) -> DatagramRoute {
        guard !actions.isEmpty else { return route }
        switch route {
        case .deliver(let user, let sealed, let address): return .actions(actions + [.deliver(user: user, sealed, to: address)])
        case .actions(let more): return .actions(actions + more)
        }
    }

    /// A receipt's fast copy (the control channel carries the reliable one): forwarded to a
    /// sender on this relay, else dropped without asking Redis.
    private mutating func routeReceiptDatagram(_ payload: ByteBuffer, _ receipt: DatagramHeader, from user: String) -> DatagramRoute {
        guard receipt.version == SIMPMessage.currentVersion else {
            return .actions([.reject(.unsupportedVersion, detail: "receipt datagram version \(receipt.version) from \(user)")])
        }
        guard receipt.fromUser == user else {
            return .actions([.reject(.senderMismatch, detail: "receipt datagram of \(user) from \"\(receipt.fromUser)\"")])
        }
        guard receipt.messageId != 0 else {
            return .actions([.reject(.missingField, detail: "receipt datagram without messageId from \(user)")])
        }
        guard sessions[receipt.toUser] != nil else {
            return .actions([.reject(.receiptUnroutable, detail: "receipt datagram from \(user) for \(receipt.toUser), who is not on this relay")])
        }
        return deliver(payload, to: receipt.toUser)
    }

    /// Validates an authentic content (or TYPING) datagram and decides where it goes: a local
    /// user, a room, another relay, an offline user's inbox.
    private mutating func routeContent(_ payload: ByteBuffer, _ message: DatagramHeader, from user: String, now: NIODeadline) -> DatagramRoute {
        guard message.version == SIMPMessage.currentVersion else {
            return .actions([.reject(.unsupportedVersion, detail: "datagram version \(message.version)")]
                + tell(user, .error(.unsupportedVersion, "this relay speaks SIMP version \(SIMPMessage.currentVersion)", messageId: message.messageId)))
        }
        guard message.fromUser == user else {
            return .actions([.reject(.senderMismatch, detail: "\(user)'s session sent a datagram from \"\(message.fromUser)\"")]
                + tell(user, .error(.senderMismatch, "fromUser must be \(user), the user this session logged in as", messageId: message.messageId)))
        }
        guard !message.toUser.isEmpty, message.messageId != 0 else {
            return .actions([.reject(.missingField, detail: "datagram without toUser or messageId")]
                + tell(user, .error(.badRequest, "a message needs fromUser, toUser and messageId", messageId: message.messageId)))
        }
        if let wait = messageRates.admit(user, now: now) {
            return .actions([.reject(.messageRateLimited, detail: "\(user)")] + throttleNotice(user, message, wait: wait, now: now))
        }
        if !inbox.isIdle, message.kind != .typing,
           inbox.holdIfDelivering(payload, messageId: message.messageId, to: message.toUser, from: message.fromUser) {
            return .actions([]) // stored messages from the same sender go first
        }
        if Self.isRoomAddress(message.toUser) {
            guard message.kind != .typing else { return .actions([]) } // typing is for one peer only
            return .actions(postToRoom(payload, message))
        }
        if sessions[message.toUser] != nil {
            return deliver(payload, to: message.toUser)
        }
        return .actions(routeRemote(.datagram(payload), to: message.toUser, now: now))
    }

    /// Seals `payload` for `user`'s session and sends it to the user's address: every datagram
    /// for a user leaves through here, from a local sender or handed over by another relay.
    mutating func deliver(_ payload: ByteBuffer, to user: String) -> DatagramRoute {
        guard let address = sessions[user]?.route.address else {
            return .actions([.reject(.recipientNotHere, detail: "datagram for \(user), who has no session on \(configuration.relayId)")])
        }
        let sealed = sessions[user]!.sealer.seal(payload: payload)
        return .deliver(user: user, sealed, to: address)
    }

    /// Encodes and seals `message` for `user`'s session.
    private mutating func seal(_ message: SIMPMessage, for user: String) -> ByteBuffer {
        sessions[user]!.sealer.seal(message)
    }

    /// The routing fields of a payload: read directly when possible, else fully decoded.
    static func header(of bytes: ByteBuffer) throws -> DatagramHeader {
        if let header = DatagramHeader.parse(bytes) { return header }
        return DatagramHeader(try MessageCodec.decode(bytes))
    }

    /// Moves a local user's route to `source` (the newest authentic datagram came from there).
    private mutating func follow(_ user: String, to source: SocketAddress) -> [Action] {
        guard var session = sessions[user], session.route.address != source, let port = source.port, port > 0 else { return [] }
        session.route.address = source
        sessions[user] = session
        return [.moveRoute(user: user, route: session.route, session: session.session)]
    }

    /// Redis answered a `.lookup`: delivers the payloads that waited for it. `known` says
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

    /// A datagram whose recipient has no route: a user seen before is offline (the message
    /// goes to its inbox, see `storeOffline`), anyone else is unknown (the sender is told).
    func noRoute(_ message: DatagramHeader, payload: ByteBuffer, known: Bool) -> [Action] {
        guard message.kind != .typing else { return [] } // at most once: never stored, never refused
        guard !known else { return storeOffline(payload, message) }
        var error = SIMPMessage.error(.unknownRecipient, "no user \"\(message.toUser)\" is registered", messageId: message.messageId)
        error.fromUser = message.toUser
        return [.reject(.unknownRecipient, detail: "\(message.fromUser) -> \(message.toUser)")] + tell(message.fromUser, error)
    }

    /// RATE_LIMITED to a throttled sender, at most every 100 ms (the notice is itself traffic).
    private mutating func throttleNotice(_ user: String, _ message: DatagramHeader, wait: TimeAmount, now: NIODeadline) -> [Action] {
        guard let due = sessions[user]?.nextThrottleNotice, due <= now else { return [] }
        sessions[user]!.nextThrottleNotice = now + .milliseconds(100)
        return tell(user, .rateLimited("\(user) sends too fast", retryAfter: wait, messageId: message.messageId))
    }

    /// An ERROR about `message` to its sender, if the sender has a session here.
    func tellSender(_ message: DatagramHeader, _ code: SIMPMessage.ErrorCode, _ text: String) -> [Action] {
        tell(message.fromUser, .error(code, text, messageId: message.messageId))
    }

    /// A control message to `user`, if the user has a session here.
    func tell(_ user: String, _ message: SIMPMessage) -> [Action] {
        guard let session = sessions[user] else { return [] }
        var message = message
        message.toUser = user
        return [.send(session.connection, message)]
    }
}
