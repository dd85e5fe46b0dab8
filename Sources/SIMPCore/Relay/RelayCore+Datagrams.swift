import NIOCore

/// The data path (docs/PROTOCOL.md §5): every datagram is sealed for its sender's session;
/// the relay opens it (MAC, replay window), checks that `fromUser` is the session's user,
/// limits the user's rate, and seals the payload again for the recipient's session.
extension RelayCore {
    /// A UDP datagram arrived from `source`. Only the payload's routing header is read
    /// (`DatagramHeader.parse`) unless the bytes need the full decoder.
    ///
    /// Addresses follow authentic traffic: when the newest authentic datagram of a session (the
    /// highest counter so far) comes from a new source, the user's route moves there (NAT
    /// rebinding, roaming). Forged, replayed or older datagrams never move it.
    public mutating func datagramReceived(_ bytes: ByteBuffer, from source: SocketAddress, now: NIODeadline, into output: inout [RelayAction]) {
        guard !isDraining else {
            return output.append(.reject(.draining, detail: "datagram of \(bytes.readableBytes) bytes while shutting down"))
        }
        switch sessions.open(bytes, from: source) {
        case .success(let opened): route(opened, from: .udp(source), now: now, into: &output)
        case .failure(let rejection): output.append(rejection.action)
        }
    }

    /// A sealed datagram arrived in a DATAGRAM frame on `connection` (docs/PROTOCOL.md §5.5):
    /// it takes the same path as one from UDP (seal, replay window, rate limits, routing). Its
    /// session must be the connection's own. When it is the session's newest, the session's
    /// datagrams go over the control connection from now on.
    public mutating func datagramCarried(_ bytes: ByteBuffer, on connection: ConnectionID, now: NIODeadline, into output: inout [RelayAction]) {
        guard !isDraining else {
            return output.append(.reject(.draining, detail: "carried datagram of \(bytes.readableBytes) bytes while shutting down"))
        }
        switch sessions.openCarried(bytes, on: connection) {
        case .success(let opened): route(opened, from: .control(connection), now: now, into: &output)
        case .failure(let rejection): output.append(rejection.action)
        }
    }

    /// Where an authentic datagram came from: its UDP source, or the control connection that
    /// carried it.
    enum DatagramSource {
        case udp(SocketAddress)
        case control(ConnectionID)
    }

    /// An authentic datagram, from UDP or carried, goes its way. The session's datagram path
    /// follows its newest datagrams: one carried moves it to the control connection, one from
    /// UDP other than a HELLO (the client's probe, docs/PROTOCOL.md §5.5) moves it back.
    private mutating func route(
        _ opened: SessionTable.OpenedDatagram, from source: DatagramSource, now: NIODeadline, into output: inout [RelayAction]
    ) {
        let user = opened.user
        connections.heard(opened.connection, now: now) // traffic is liveness, over UDP too
        let header: DatagramHeader
        do { header = try Self.header(of: opened.payload) } catch {
            return output.append(.reject(.malformed, detail: "payload of \(opened.payload.readableBytes) bytes from \(user): \(error)"))
        }
        let carried = source.isControl
        if opened.isNewest, carried != opened.overControl, carried || header.kind != .hello {
            sessions.carryDatagrams(ofSession: opened.sessionId, overControl: carried)
            // The registration shows the path (simp-server sessions): written on a change only.
            if let registration = sessions.registration(ofSession: opened.sessionId) { output.append(.store(.moveRoute(registration))) }
        } else if opened.routeMoved, let moved = sessions.registration(ofSession: opened.sessionId) {
            output.append(.store(.moveRoute(moved)))
        }
        if timers.awaitsInboxLoads, let recipient = sessions.recipient(ofSession: opened.sessionId), let load = timers.takeInboxLoad(of: recipient) {
            if let connectedAt = load.connectedAt { inbox.roundTripMeasured(to: recipient, now - connectedAt) }
            output.append(.store(.loadInbox(user: user, device: recipient.device))) // the client is ready for it
        }
        switch header.kind {
        case .hello:
            guard let hello = sessions.sealReply(SIMPMessage(kind: .hello, toUser: user), forSession: opened.sessionId) else { break }
            switch source {
            case .udp(let address): output.append(.reply(hello, to: address)) // a probe is answered over UDP whatever the path
            case .control(let connection): output.append(.carry(connection, hello))
            }
        case .ping:
            break // a keepalive: keeps the NAT mapping open
        case .receipt:
            routeReceiptDatagram(opened.payload, header, from: user, session: opened.sessionId, into: &output)
        case let kind where kind.isContent || kind == .typing:
            routeContent(opened.payload, header, from: user, session: opened.sessionId, now: now, into: &output)
        case .fileChunk, .fileAck, .fileUpload, .fileFetch, .fileGrant:
            routeFileDatagram(opened.payload, header, from: user, session: opened.sessionId, now: now, into: &output)
        default:
            output.append(.reject(.unexpectedKind, detail: "\(header.kind) datagram from \(user)"))
        }
    }

    /// A datagram above the relay's size limit arrived from `source` (`bytes` is what was read
    /// of it). If its header names a live session, that session's own control connection is
    /// told, at most every 100 ms; the datagram cannot be authenticated, so nothing goes
    /// anywhere else.
    public mutating func datagramTooLarge(
        _ bytes: ByteBuffer, size: Int, from source: SocketAddress, now: NIODeadline, into output: inout [RelayAction]
    ) {
        output.append(.reject(.datagramTooLarge, detail: "datagram of \(size) bytes from \(source)"))
        guard let sessionId = SealedDatagram.sessionId(of: bytes), sessions.admitThrottleNotice(forSession: sessionId, now: now) else { return }
        let text = "a datagram of \(size) bytes exceeds this relay's maximum of \(configuration.maxDatagramSize) bytes"
        tell(session: sessionId, .error(.badRequest, text), into: &output)
    }

    /// A receipt's fast copy (the control channel carries the reliable one): forwarded to the
    /// sender's sessions on this relay, else dropped without asking the store and uncounted (the
    /// control copy goes on to the sender's relay, and is counted if the sender has none).
    /// The ids of stored messages the relay is delivering to this device stay with the relay.
    private mutating func routeReceiptDatagram(
        _ payload: ByteBuffer, _ receipt: DatagramHeader, from user: String, session: UInt64, into output: inout [RelayAction]
    ) {
        guard receipt.version == SIMPMessage.currentVersion else {
            return output.append(.reject(.unsupportedVersion, detail: "receipt datagram version \(receipt.version) from \(user)"))
        }
        guard receipt.fromUser == user else {
            return output.append(.reject(.senderMismatch, detail: "receipt datagram of \(user) from \"\(receipt.fromUser)\""))
        }
        guard receipt.messageId != 0 else {
            return output.append(.reject(.missingField, detail: "receipt datagram without messageId from \(user)"))
        }
        // A sender with no session here gets nothing (`sealForEverySession` finds none): its
        // name is hashed once, there, unless stored messages are on their way to this device.
        if !inbox.isIdle, sessions.contains(receipt.toUser), let device = sessions.recipient(ofSession: session),
            inbox.isDelivering(to: device, from: receipt.toUser)
        {
            return routeReceiptCopy(payload, from: user, device: device, into: &output)
        }
        sessions.sealForEverySession(payload, to: receipt.toUser, into: &output)
    }

    /// Validates an authentic content (or TYPING) datagram of `user`'s session `session` and
    /// decides where it goes: a local user's one device, a room, another relay, the user's
    /// devices' inboxes (offline, or several devices). TYPING goes to every online device of
    /// the user instead, and is never stored.
    private mutating func routeContent(
        _ payload: ByteBuffer, _ message: DatagramHeader, from user: String, session: UInt64, now: NIODeadline, into output: inout [RelayAction]
    ) {
        guard message.version == SIMPMessage.currentVersion else {
            output.append(.reject(.unsupportedVersion, detail: "datagram version \(message.version)"))
            return tell(
                session: session,
                .error(.unsupportedVersion, "this relay speaks SIMP version \(SIMPMessage.currentVersion)", messageId: message.messageId),
                into: &output)
        }
        guard message.fromUser == user else {
            output.append(.reject(.senderMismatch, detail: "\(user)'s session sent a datagram from \"\(message.fromUser)\""))
            return tell(
                session: session,
                .error(.senderMismatch, "fromUser must be \(user), the user this session logged in as", messageId: message.messageId), into: &output)
        }
        guard !message.toUser.isEmpty, message.messageId != 0 else {
            output.append(.reject(.missingField, detail: "datagram without toUser or messageId"))
            return tell(
                session: session, .error(.badRequest, "a message needs fromUser, toUser and messageId", messageId: message.messageId), into: &output)
        }
        if let wait = messageRates.admit(user, messageId: message.messageId, now: now) {
            output.append(.reject(.messageRateLimited, detail: "\(user)"))
            guard sessions.admitThrottleNotice(forSession: session, now: now) else { return }
            return tell(session: session, .rateLimited("\(user) sends too fast", retryAfter: wait, messageId: message.messageId), into: &output)
        }
        if message.kind != .typing { noteContact(from: user, to: message.toUser, session: session, now: now, into: &output) }
        if !inbox.isIdle, message.kind != .typing, sessions.isSoleReceiver(message.toUser),
            let device = sessions.receivers(of: message.toUser).first,
            inbox.holdIfDelivering(payload, messageId: message.messageId, to: device, from: message.fromUser)
        {
            return // stored messages from the same sender go first
        }
        if Self.isRoomAddress(message.toUser) {
            guard message.kind != .typing else { return } // typing is for one peer only
            return postToRoom(payload, message, from: session, into: &output)
        }
        if message.kind == .typing, sessions.hasReceiver(message.toUser) {
            // Ephemeral: each receiving session here shows it; none is stored (PROTOCOL §6.8).
            return sessions.sealForEverySession(payload, to: message.toUser, receiversOnly: true, into: &output)
        }
        if let connection = sessions.sealForSoleReceiver(payload, to: message.toUser, into: &output) {
            return expectAnswer(on: connection, now: now, into: &output) // the common case: a local recipient with one device
        }
        if sessions.hasReceiver(message.toUser) {
            // Several devices: the message goes to each one's inbox (the relay takes custody).
            return noRoute(message, payload: payload, known: true, into: &output)
        }
        routeRemote(.datagram(payload), to: message.toUser, sender: session, now: now, into: &output)
    }

    /// Seals `payload` for `user`'s receiving session and sends it to its address: a datagram
    /// handed over by another relay leaves through here. A user with several devices has it
    /// stored for each instead (a TYPING goes to each of them here, unstored).
    mutating func deliver(_ payload: ByteBuffer, to user: String, now: NIODeadline, into output: inout [RelayAction]) {
        if let connection = sessions.sealForSoleReceiver(payload, to: user, into: &output) {
            return expectAnswer(on: connection, now: now, into: &output)
        }
        guard sessions.hasReceiver(user), let header = try? Self.header(of: payload) else {
            return output.append(.reject(.recipientNotHere, detail: "datagram for \(user), who has no receiving session on \(configuration.relayId)"))
        }
        guard !header.kind.isNeverStored else { return sessions.sealForEverySession(payload, to: user, receiversOnly: true, into: &output) }
        noRoute(header, payload: payload, known: true, into: &output)
    }

    /// Content just went to the client on `connection`, which should soon answer (a receipt):
    /// if it has been silent for the heartbeat's `suspectAfter`, it is pinged at once and given
    /// up unless heard within `answerWithin` (docs/PROTOCOL.md §4.4), so a stopped client is
    /// found within seconds of a message to it while an idle one is pinged rarely.
    mutating func expectAnswer(on connection: ConnectionID, now: NIODeadline, into output: inout [RelayAction]) {
        guard connections.suspect(connection, now: now) else { return }
        output.append(.send(connection, SIMPMessage(kind: .ping, messageId: timers.takePingId())))
    }

    /// The routing fields of a payload: read directly when possible, else fully decoded.
    static func header(of bytes: ByteBuffer) throws -> DatagramHeader {
        if let header = DatagramHeader.parse(bytes) { return header }
        return DatagramHeader(try MessageCodec.decode(bytes))
    }

    /// A datagram whose recipient has no route: a known user is offline (the message goes to
    /// its inbox), anyone else is unknown (the session that sent it, `sender`, is told).
    func noRoute(_ message: DatagramHeader, payload: ByteBuffer, known: Bool, sender: UInt64? = nil, into output: inout [RelayAction]) {
        guard !message.kind.isNeverStored else { return } // at most once: never stored, never refused
        guard !known else { return storeOffline(payload, message, into: &output) }
        var error = SIMPMessage.error(.unknownRecipient, "no user \"\(message.toUser)\" is registered", messageId: message.messageId)
        error.fromUser = message.toUser
        output.append(.reject(.unknownRecipient, detail: "\(message.fromUser) -> \(message.toUser)"))
        if let sender { tell(session: sender, error, into: &output) }
    }

    /// An ERROR about `message` to its sender's sessions here (for answers of the store, which
    /// do not name the session that sent it).
    func tellSender(_ message: DatagramHeader, _ code: SIMPMessage.ErrorCode, _ text: String, into output: inout [RelayAction]) {
        tell(message.fromUser, .error(code, text, messageId: message.messageId), into: &output)
    }
}

extension RelayCore.DatagramSource {
    var isControl: Bool {
        if case .control = self { return true }
        return false
    }
}
