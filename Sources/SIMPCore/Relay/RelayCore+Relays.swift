import NIOCore

/// Many relays on one store: payloads for users on other relays are published to their relay,
/// moves invalidate cached routes (docs/PROTOCOL.md §7.7).
extension RelayCore {
    // MARK: Routing to other relays

    /// Routes a payload for `user`, who has no session here, from the cached route or after a
    /// lookup. `sender` is the session here that sent it, the only one told of an error about it.
    mutating func routeRemote(
        _ payload: RelayDelivery.Payload, to user: String, sender: UInt64? = nil, now: NIODeadline, into output: inout [RelayAction]
    ) {
        switch routes.route(payload, to: user, sender: sender, now: now) {
        case .cached(let cached): dispatch(RouteTable.Waiting(payload, sender: sender), to: user, via: cached, into: &output)
        case .lookUp: output.append(.store(.lookup(user: user)))
        case .waiting: break
        case .backlogFull: output.append(.reject(.lookupBacklogFull, detail: "lookup backlog for \(user) full"))
        }
    }

    /// The store answered a `.lookup`: the payloads that waited for it go on. For a user with
    /// sessions here, what the store said about its devices is kept, and the payloads also go
    /// to its sessions here.
    mutating func lookedUp(_ user: String, _ result: Result<UserRoutes, StoreFailure>, now: NIODeadline, into output: inout [RelayAction]) {
        guard case .success(let answer) = result else {
            let waiting = routes.takeWaiting(for: user)
            output += waiting.map { _ in .reject(.registryUnavailable, detail: "registry lookup for \(user) failed") }
            return
        }
        if !sessions.contains(user), routes.contradictsRecentAnswers(answer, about: user, now: now) {
            // Not "unknown": the store lost the user's keys (a failover); their relay writes
            // them again at its next refresh, and the senders retransmit until then.
            let waiting = routes.takeWaiting(for: user)
            output += waiting.map { _ in .reject(.registryUnavailable, detail: "the store lost \(user), known moments ago; not refused, retried") }
            return
        }
        let (cached, waiting) = routes.lookedUp(user, routes: answer, now: now)
        guard sessions.contains(user) else {
            for held in waiting { dispatch(held, to: user, via: cached, into: &output) }
            return
        }
        sessions.learned(user, knownDevices: answer.knownDevices, elsewhere: answer.relays.contains { $0 != configuration.relayId })
        let receivesHere = sessions.hasReceiver(user)
        for held in waiting {
            let payload = held.payload
            if case .datagram = payload, !receivesHere {
                // Only send-only sessions here (a one-shot `simp send`): content goes where the
                // user receives.
                dispatch(held, to: user, via: cached, into: &output)
                continue
            }
            deliverToLocalUser(RelayDelivery(user: user, payload: payload), now: now, into: &output)
            if case .datagram = payload { continue }
            publish(payload, to: user, relays: cached.routes.relays, into: &output)
        }
    }

    /// Sends a payload for a user without a session here along the routes read from the store:
    /// a datagram to the relay of the user's one device (or, for a user with several devices or
    /// none online, to the devices' inboxes), a control message to every relay holding a
    /// session of the user, an inbox entry to every relay holding a receiving session. A
    /// datagram with a `fanOut` (TYPING, FILE_ACK) goes to every relay holding such a session.
    private func dispatch(_ waiting: RouteTable.Waiting, to user: String, via cached: RouteTable.CachedRoute, into output: inout [RelayAction]) {
        let payload = waiting.payload
        switch payload {
        case .datagram(let bytes):
            switch (try? Self.header(of: bytes))?.kind.fanOut {
            case .receivers: return publish(payload, to: user, relays: cached.routes.receivers.map(\.relayId), into: &output)
            case .everySession: return publish(payload, to: user, relays: cached.routes.relays, into: &output)
            case nil: break
            }
            guard let route = cached.route, route.relayId != configuration.relayId else {
                // Several devices, none online, or a route left behind by this relay's previous
                // life: the message goes to the user's inboxes (or the user is unknown).
                return noRoute(for: waiting, to: user, known: cached.known || !cached.routes.relays.isEmpty, into: &output)
            }
            output.append(.store(.publish(relay: route.relayId, RelayDelivery(user: user, payload: payload))))
        case .control:
            guard cached.routes.relays.contains(where: { $0 != configuration.relayId }) else {
                return noRoute(for: waiting, to: user, known: cached.known, into: &output)
            }
            publish(payload, to: user, relays: cached.routes.relays, into: &output)
        case .inboxEntry:
            publish(payload, to: user, relays: cached.routes.receivers.map(\.relayId), into: &output)
        }
    }

    /// A FILE_CHUNK for `user` that went to its receiving sessions here also goes to each
    /// other relay where the user has a receiving session, as the route cache says: a user
    /// with devices on several relays gets a file live on each (docs/PROTOCOL.md §5.6, §5.7).
    /// When the cache says nothing (it lives 2 s), the store is asked and this chunk goes no
    /// further: the devices elsewhere fetch what they lack (FILE_FETCH).
    mutating func sendToReceiversElsewhere(_ payload: ByteBuffer, to user: String, now: NIODeadline, into output: inout [RelayAction]) {
        guard let cached = routes.cachedRoutes(of: user, now: now) else {
            if routes.beginLookup(of: user) { output.append(.store(.lookup(user: user))) }
            return
        }
        publish(.datagram(payload), to: user, relays: cached.receivers.map(\.relayId), into: &output)
    }

    /// Publishes `payload` for `user` to each of `relays` but this one, once.
    private func publish(_ payload: RelayDelivery.Payload, to user: String, relays: [String], into output: inout [RelayAction]) {
        var done: Set<String> = [configuration.relayId]
        for relay in relays where done.insert(relay).inserted {
            output.append(.store(.publish(relay: relay, RelayDelivery(user: user, payload: payload))))
        }
    }

    private func noRoute(for waiting: RouteTable.Waiting, to user: String, known: Bool, into output: inout [RelayAction]) {
        switch waiting.payload {
        case .datagram(let bytes):
            guard let header = try? Self.header(of: bytes) else { return }
            noRoute(header, payload: bytes, known: known, sender: waiting.sender, into: &output)
        case .control(let message)
        where message.kind == .presence || message.kind == .keysPublish || message.kind == .keysFetch || message.status == .roomDelivered:
            break // news for someone who is not connected anywhere: nobody to tell
        case .control(let message):
            output.append(.reject(.receiptUnroutable, detail: "\(message.kind) from \(message.fromUser) for \(user), who is offline"))
        case .inboxEntry:
            break // it waits in the inbox for the user's next connect
        }
    }

    /// A `.publish` was answered: with no listener, that relay is gone, so every route through
    /// it is forgotten (the next payload looks the user up again).
    mutating func published(
        to relay: String, _ delivery: RelayDelivery, _ result: Result<Int, StoreFailure>, into output: inout [RelayAction]
    ) {
        switch result {
        case .success(let listeners) where listeners > 0:
            break
        case .success:
            routes.forgetRoutes(through: relay)
            output.append(.reject(.relayUnreachable, detail: "delivery for \(delivery.user) via \(relay): no relay listening"))
        case .failure(let failure):
            output.append(.reject(.relayUnreachable, detail: "delivery for \(delivery.user) via \(relay) failed: \(failure)"))
        }
    }

    // MARK: Deliveries from other relays

    /// Hands a payload to `delivery.user`, who must have a session on this relay: a datagram
    /// leaves sealed for the user's session, a control message goes down the user's control
    /// connection, an inbox entry starts its delivery.
    mutating func deliverToLocalUser(_ delivery: RelayDelivery, now: NIODeadline, into output: inout [RelayAction]) {
        guard sessions.contains(delivery.user) else {
            return output.append(.reject(.recipientNotHere, detail: "delivery for \(delivery.user), who has no session on \(configuration.relayId)"))
        }
        switch delivery.payload {
        case .datagram(let payload) where (try? Self.header(of: payload))?.kind.fanOut == .everySession:
            sessions.sealForEverySession(payload, to: delivery.user, receiversOnly: false, into: &output)
        case .datagram(let payload): deliver(payload, to: delivery.user, now: now, into: &output)
        case .control(let message):
            if message.kind == .receipt { timers.receiptRouted(now: now) } // a drain waits for these too
            for connection in sessions.connections(of: delivery.user) { sendControl(message, to: connection, into: &output) }
        case .inboxEntry(let entry):
            for device in sessions.receivers(of: delivery.user) { handOver(entry, to: device, now: now, into: &output) }
        }
    }

    /// Bytes arrived on this relay's delivery channel. A user who moved away meanwhile is not
    /// chased: the payload is dropped and counted, its sender retransmits along the new route.
    public mutating func relayDeliveryReceived(_ bytes: ByteBuffer, now: NIODeadline, into output: inout [RelayAction]) {
        do {
            deliverToLocalUser(try RelayDelivery.decode(bytes), now: now, into: &output)
        } catch {
            output.append(.reject(.badRelayDelivery, detail: "\(error)"))
        }
    }

    /// Something arrived on this relay's channels that is not a valid announcement (`what`
    /// says what): rejected and counted.
    public func relayChannelMalformed(_ what: String, into output: inout [RelayAction]) {
        output.append(.reject(.badRelayDelivery, detail: "malformed \(what)"))
    }

    /// The delivery subscription was (re)established: moves announced while it was down were
    /// missed, so every cached route is dropped.
    public mutating func deliveryChannelSubscribed() {
        routes.forgetAll()
    }

    // MARK: Moves

    /// Relay `move.relayId` registered a session for `move.user`: the cached route is stale.
    /// A session of that user here is checked against the store and closed if superseded.
    public mutating func userMoved(_ move: UserMove, into output: inout [RelayAction]) {
        guard move.relayId != configuration.relayId else { return }
        routes.forget(move.user)
        let local = sessions.registrations(of: move.user)
        guard !local.isEmpty else { return }
        for registration in local { output.append(.store(.checkSession(user: move.user, session: registration.session))) }
        output.append(.store(.lookup(user: move.user))) // its devices and relays may have changed
    }

    /// The session token an operator's `simp-server sessions end` writes in place of a
    /// user's registration (docs/PROTOCOL.md §7): no relay refreshes it, and the relay holding
    /// the session closes it when told.
    public static let sessionEndedByOperator = "ended-by-operator"

    /// The store answered `.checkSession`: when it no longer names `session`, the user connected
    /// again on another relay (or an operator ended the session), so this relay's session is
    /// told and closed.
    mutating func sessionChecked(user: String, session: String, current: String?, now: NIODeadline, into output: inout [RelayAction]) {
        guard current != session, let id = sessions.session(of: user, token: session), let connection = sessions.connection(ofSession: id)
        else { return }
        let reason: SessionEndReason = current == Self.sessionEndedByOperator ? .endedByOperator : .replacedElsewhere
        guard let registration = endSession(on: connection, reason, now: now, into: &output) else { return }
        // Ended by an operator: SESSION_ENDED, and the client may log in again; replaced by a
        // newer session: ALREADY_CONNECTED, and the client stops (docs/PROTOCOL.md §2.6, §4.7).
        let error: SIMPMessage =
            current == Self.sessionEndedByOperator
            ? .error(.sessionEnded, "the relay's operator ended \(user)'s session")
            : .error(
                .alreadyConnected,
                registration.device.isEmpty
                    ? "\(user) connected again on another relay"
                    : "a newer session of \(user)'s device \"\(registration.device)\" took over on another relay")
        output += [.send(connection, error), .close(connection)]
    }
}
