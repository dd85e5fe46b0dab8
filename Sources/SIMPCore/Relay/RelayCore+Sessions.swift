import NIOCore

/// A session's life on its connection: it starts when a login is accepted (`beginSession`),
/// becomes connected when the store has its registration (`registered`), and ends with its
/// connection or when told to go (`endSession`). Each step moves the connection's phase
/// (`ConnectionTable.change`) and reports what happened (`RelayEvent.userConnected`,
/// `.userDisconnected`).
extension RelayCore {
    /// Forgets `connection` (its login, budgets, token and phase) and ends its session, if it
    /// had one: a session that was connected is reported ended for `reason`.
    mutating func forgetConnection(_ connection: ConnectionID, _ reason: SessionEndReason, into output: inout [RelayAction]) {
        login.forget(connection)
        tokens.forget(connection)
        budgets.forget(connection)
        guard let phase = connections.close(connection), let session = phase.session else { return }
        endSession(session, wasConnected: phase.isConnected, reason, into: &output)
    }

    /// Starts `user`'s session on `connection` for the CONNECT's device (send-only if it says
    /// so); the CONNECTED goes out once the store has the registration. A receiving session of
    /// the same device is told and closed (the newest wins); other devices' sessions stay.
    mutating func beginSession(
        _ user: String, keys: SessionKeys, connected: SIMPMessage, on connection: ConnectionID, peer: SocketAddress, connect: SIMPMessage?,
        now: NIODeadline, into output: inout [RelayAction]
    ) {
        guard connections.phase(of: connection) == .awaitingLogin else { return } // closed, or closing, meanwhile
        var address = peer
        address.port = Int(connect?.udpPort ?? 0)
        let device = connect?.device ?? "", receives = !(connect?.sendOnly ?? false)
        let registration = Registration(
            user: user, route: Route(address: address, relayId: configuration.relayId), session: "\(configuration.relayId)/\(connection.rawValue)",
            device: device, receives: receives)
        if receives, let previous = sessions.receivingSession(of: user, device: device), let old = sessions.connection(ofSession: previous) {
            endSession(on: old, .replaced, now: now, into: &output)
            output += [.send(old, .error(.alreadyConnected, Self.replacedText(user: user, device: device))), .close(old)]
        }
        sessions.start(registration, keys: keys, on: connection, readsBatchReceipts: connect?.acceptsBatchReceipts ?? false)
        // From now on what is stored for the device waits for its backlog (a message stored
        // while the registration is written would otherwise go out first, with a floor that
        // lets the device's receiver start the stream past the backlog).
        if receives {
            inbox.deviceConnected(Recipient(user: user, device: device))
            presence.loggedIn(user, hidden: connect?.hidePresence ?? false)
        }
        routes.forget(user)
        connections.change(connection, .sessionStarted(user: user, session: keys.sessionId, connected: connected), now: now)
        output.append(.store(.register(registration, connection: connection)))
    }

    /// The ERROR ALREADY_CONNECTED text of a session replaced by a newer one of its device.
    static func replacedText(user: String, device: String) -> String {
        device.isEmpty
            ? "\(user) connected again elsewhere (a newer session of this device took over)"
            : "a newer session of \(user)'s device \"\(device)\" took over"
    }

    /// Ends the session on `connection` (registering or connected) while the connection stays
    /// open for a moment: it moves to `closing` (the caller tells its client why and closes it),
    /// or with `.registrationFailed` back to awaiting a login. The registration is not withdrawn
    /// (a newer session took it over, or it was never written). A session that was connected is
    /// reported ended for `reason`. Returns the registration (nil: no session there).
    @discardableResult
    mutating func endSession(
        on connection: ConnectionID, _ reason: SessionEndReason, moving change: ConnectionTable.Change = .closing, now: NIODeadline,
        into output: inout [RelayAction]
    ) -> Registration? {
        guard let phase = connections.phase(of: connection), let session = phase.session, connections.change(connection, change, now: now) != nil
        else { return nil }
        return endSession(session, wasConnected: phase.isConnected, reason, withdraw: false, into: &output)
    }

    /// Ends session `session` here: its registration is withdrawn (unless another session of
    /// the same device takes over at once, or none was written: `withdraw: false`), and the
    /// user's presence is recorded offline when its last receiving session here ends. A session
    /// that `wasConnected` is reported ended for `reason` (`RelayEvent.userDisconnected`).
    @discardableResult
    mutating func endSession(
        _ session: UInt64, wasConnected: Bool, _ reason: SessionEndReason, withdraw: Bool = true, into output: inout [RelayAction]
    ) -> Registration? {
        guard let registration = sessions.end(session) else { return nil }
        if wasConnected { output.append(.event(.userDisconnected(registration, reason))) }
        if registration.receives { inbox.userLeft(Recipient(user: registration.user, device: registration.device)) }
        guard withdraw else { return registration }
        output.append(.store(.unregister(user: registration.user, session: registration.session, device: registration.device)))
        if registration.receives, !sessions.hasReceiver(registration.user) {
            output.append(.store(.recordPresence(user: registration.user, online: false, hidden: presence.isHidden(registration.user))))
            presence.left(registration.user)
        }
        return registration
    }

    /// The store answered `.register`: CONNECTED goes out. A receiving session's stored
    /// messages are sent once its first authentic datagram (the client's HELLO) shows that the
    /// client has its keys and its UDP path works — sent earlier, they could reach the client
    /// before CONNECTED and be lost until retransmitted — or after `inboxStartDelay` at the
    /// latest. A send-only session gets none.
    mutating func registered(
        on connection: ConnectionID, _ result: Result<(knownDevices: Int, elsewhere: Bool), StoreFailure>, now: NIODeadline,
        into output: inout [RelayAction]
    ) {
        guard case .registering(let user, let session, let connected) = connections.phase(of: connection),
            let registration = sessions.registration(ofSession: session)
        else {
            return // closed meanwhile (connectionClosed already unregistered it), or replaced
        }
        switch result {
        case .success(let devices):
            sessions.learned(user, knownDevices: devices.knownDevices, elsewhere: devices.elsewhere)
        case .failure:
            endSession(on: connection, .connectionClosed, moving: .registrationFailed, now: now, into: &output)
            output.append(.send(connection, .error(.internal, "registry unavailable, try again")))
            return
        }
        connections.change(connection, .registered, now: now)
        output += [
            .send(connection, connected), .event(.userConnected(registration)),
            .store(.announceMove(UserMove(user: user, relayId: configuration.relayId))),
        ]
        guard registration.receives else { return }
        timers.loadInbox(of: Recipient(user: user, device: registration.device), at: now + configuration.inboxStartDelay, connectedAt: now)
        output.append(.store(.recordPresence(user: user, online: true, hidden: presence.isHidden(user))))
    }
}
