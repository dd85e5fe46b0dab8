import NIOCore

/// Many relays on one Redis: payloads for users on other relays go through Redis pub/sub,
/// moves invalidate cached routes (docs/PROTOCOL.md §7.7).
extension RelayCore {
    // MARK: Routing to other relays

    /// Routes a payload for `user`, who has no session here, from the cached route or after a
    /// lookup.
    mutating func routeRemote(_ payload: RelayDelivery.Payload, to user: String, now: NIODeadline) -> [Action] {
        if let cached = routeCache[user], cached.expires > now {
            return dispatch(payload, to: user, via: cached)
        }
        return awaitRoute(payload, for: user)
    }

    /// Sends a payload for a user without a session here along a route read from Redis.
    func dispatch(_ payload: RelayDelivery.Payload, to user: String, via cached: CachedRoute) -> [Action] {
        guard let route = cached.route, route.relayId != configuration.relayId else {
            // No route, or one left behind by this relay's previous life: the user is offline.
            return noRoute(for: payload, to: user, known: cached.known || cached.route != nil)
        }
        return [.publish(relay: route.relayId, RelayDelivery(user: user, payload: payload))]
    }

    private func noRoute(for payload: RelayDelivery.Payload, to user: String, known: Bool) -> [Action] {
        switch payload {
        case .datagram(let bytes):
            return (try? Self.header(of: bytes)).map { noRoute($0, payload: bytes, known: known) } ?? []
        case .control(let message) where message.kind == .presence || message.status == .roomDelivered:
            return [] // news for someone who is not connected anywhere: nobody to tell
        case .control(let message):
            return [.reject(.receiptUnroutable, detail: "\(message.kind) from \(message.fromUser) for \(user), who is offline")]
        case .inboxEntry:
            return [] // it waits in the inbox for the user's next connect
        }
    }

    // MARK: Deliveries from other relays

    /// Hands a payload to `delivery.user`, who must have a session on this relay: a datagram
    /// leaves by the relay's UDP socket sealed for the user's session (`.deliver`), a control message down the user's
    /// control connection. Every payload that reaches a local user from elsewhere goes
    /// through here.
    public mutating func deliverToLocalUser(_ delivery: RelayDelivery, now: NIODeadline = .now()) -> [Action] {
        guard let session = sessions[delivery.user] else {
            return [.reject(.recipientNotHere, detail: "delivery for \(delivery.user), who has no session on \(configuration.relayId)")]
        }
        switch delivery.payload {
        case .datagram(let payload):
            switch deliver(payload, to: delivery.user) {
            case .deliver(let user, let sealed, let address): return [.deliver(user: user, sealed, to: address)]
            case .actions(let actions): return actions
            }
        case .control(let message):
            return [.send(session.connection, message)]
        case .inboxEntry(let entry):
            return handOver(entry, to: delivery.user, now: now)
        }
    }

    /// Bytes arrived on this relay's delivery channel.
    public mutating func relayDeliveryReceived(_ bytes: ByteBuffer) -> [Action] {
        let delivery: RelayDelivery
        do { delivery = try RelayDelivery.decode(bytes) } catch {
            return [.reject(.badRelayDelivery, detail: "\(error)")]
        }
        return relayDeliveryReceived(delivery)
    }

    /// Another relay handed over `delivery`. A user who moved away meanwhile is not chased: the
    /// payload is dropped and counted, its sender retransmits along the new route.
    public mutating func relayDeliveryReceived(_ delivery: RelayDelivery) -> [Action] {
        deliverToLocalUser(delivery)
    }

    /// A `.publish` for `relay` reached no subscriber: that relay is gone, so every route
    /// through it is forgotten (the next payload looks the user up again).
    public mutating func deliveryUnheard(relay: String, user: String) -> [Action] {
        routeCache = routeCache.filter { $0.value.route?.relayId != relay }
        return [.reject(.relayUnreachable, detail: "delivery for \(user) via \(relay): no relay listening")]
    }

    /// The delivery subscription was (re)established: moves announced while it was down were
    /// missed, so every cached route is dropped.
    public mutating func deliveryChannelSubscribed() {
        routeCache.removeAll()
    }

    // MARK: Moves

    /// Relay `move.relayId` registered a session for `move.user`: the cached route is stale.
    /// A session of that user here is checked against Redis and closed if superseded.
    public mutating func userMoved(_ move: UserMove) -> [Action] {
        guard move.relayId != configuration.relayId else { return [] }
        routeCache[move.user] = nil
        guard let session = sessions[move.user] else { return [] }
        return [.checkSession(user: move.user, session: session.session)]
    }

    /// Redis no longer names `session` for `user`: the user connected again on another relay,
    /// so this relay's session is told and closed (the newest session wins, as on one relay).
    public mutating func sessionSuperseded(user: String, session: String) -> [Action] {
        guard let local = sessions[user], local.session == session else { return [] }
        endSession(of: user)
        connections[local.connection]?.state = .awaitingLogin
        return [.send(local.connection, .error(.alreadyConnected, "\(user) connected again on another relay")),
                .close(local.connection)]
    }
}
