import NIOCore

/// What became of a `.storeInInbox` action.
public enum InboxStoreResult: Sendable, Equatable {
    /// The entry is in the inbox (`duplicate`: an entry with the same dedupe key already was);
    /// `discarded` left the inbox to make room or because they expired.
    case stored(duplicate: Bool, discarded: [(entry: InboxEntry, reason: InboxDiscardReason)])
    /// Redis could not be asked.
    case failed

    public static func == (a: InboxStoreResult, b: InboxStoreResult) -> Bool {
        switch (a, b) {
        case (.failed, .failed): return true
        case (.stored(let d1, let x1), .stored(let d2, let x2)):
            return d1 == d2 && x1.map(\.entry) == x2.map(\.entry) && x1.map(\.reason) == x2.map(\.reason)
        default: return false
        }
    }
}

/// The offline inbox: messages for a known user without a session are stored (the sender gets
/// a STORED receipt); when the user connects the relay delivers them as their retransmitting
/// sender (`InboxCore`) and tells each original sender when its message arrived.
extension RelayCore {
    /// When `inboxPoll` next has work, if ever.
    public var inboxNextDeadline: NIODeadline? { inbox.nextDeadline }
    /// Stored messages in flight to users who came back.
    public var inboxInFlight: Int { inbox.inFlightCount }

    /// A content datagram for a known user without a route: store it in the user's inbox.
    func storeOffline(_ bytes: ByteBuffer, _ header: DatagramHeader) -> [Action] {
        guard let message = try? MessageCodec.decode(bytes) else {
            return [.reject(.malformed, detail: "datagram for offline \(header.toUser) does not decode")]
        }
        return [.storeInInbox(user: message.toUser, message: message)]
    }

    /// Redis answered a `.storeInInbox` for `user`: the sender of a stored message learns it is
    /// stored; the senders of discarded entries learn they were discarded. A content entry for
    /// a user connected here (a room copy, or a store that crossed the user's connect) goes out now.
    public mutating func inboxStoreCompleted(user: String, entry: InboxEntry, result: InboxStoreResult, now: NIODeadline) -> [Action] {
        let message = entry.message
        guard case .stored(let duplicate, let discarded) = result else {
            return [.reject(.inboxUnavailable, detail: "\(message.fromUser) -> \(user) (\(message.kind))")]
        }
        var actions = discarded.flatMap { discard(user: user, $0.entry, $0.reason) }
        if !duplicate, sessions[user] != nil, message.kind.isContent {
            actions += handOver(entry, to: user, now: now)
        }
        if message.kind.isContent, let sender = sessions[message.fromUser] {
            var receipt = message.receipt(holdMicros: 0)
            receipt.attempt = 0 // not an RTT sample: the receiver never saw it
            receipt.status = .stored
            actions.append(.send(sender.connection, receipt))
        }
        if !duplicate, sessions[user] == nil {
            // The user may be connected to another relay: that relay hands the entry over now.
            actions += routeRemote(.inboxEntry(entry), to: user, now: now)
        }
        return actions
    }

    /// An entry just stored for `user`, who is connected here, goes out now. A room copy makes
    /// the relay read the whole inbox again instead: copies stored by different relays may
    /// arrive out of the room's order, and reading them sorted keeps one order for everyone.
    mutating func handOver(_ entry: InboxEntry, to user: String, now: NIODeadline) -> [Action] {
        guard !Self.isRoomAddress(entry.message.fromUser) else { return [.loadInbox(user: user)] }
        return inboxActions(inbox.enqueue(entry, for: user, now: now))
    }

    /// Redis answered a `.loadInbox`: delivery to `user` starts (if it is still connected).
    /// `wallNow` is the wall clock in milliseconds since the epoch (for the TTL).
    public mutating func inboxLoaded(user: String, entries: [InboxEntry], wallNow: Int64, now: NIODeadline) -> [Action] {
        guard sessions[user] != nil else { return [] }
        return inboxActions(inbox.loaded(user: user, entries: entries, wallNow: wallNow, now: now))
    }

    /// Retransmits stored messages whose receipts are overdue.
    public mutating func inboxPoll(now: NIODeadline) -> [Action] {
        guard let deadline = inbox.nextDeadline, deadline <= now else { return [] }
        return inboxActions(inbox.poll(now: now))
    }

    mutating func inboxActions(_ output: InboxCore.Output) -> [Action] {
        var actions: [Action] = []
        for (user, message) in output.datagrams {
            guard let address = sessions[user]?.route.address else { continue }
            actions.append(.deliver(user: user, sessions[user]!.sealer.seal(message), to: address))
        }
        for (user, entry) in output.receipts {
            guard let session = sessions[user] else { continue }
            actions += [.send(session.connection, entry.message), .removeFromInbox(user: user, entry: entry)]
        }
        for (receiver, entry) in output.delivered {
            actions.append(.removeFromInbox(user: receiver, entry: entry))
            if Self.isRoomAddress(entry.message.fromUser) {
                actions.append(.countRoomDelivery(copy: entry.message))
                continue
            }
            var receipt = entry.message.receipt(holdMicros: 0)
            receipt.attempt = 0
            receipt.status = .deliveredFromInbox
            if let sender = sessions[receipt.toUser] {
                actions.append(.send(sender.connection, receipt))
            } else {
                actions.append(.storeInInbox(user: receipt.toUser, message: receipt))
            }
        }
        for (user, payload) in output.released {
            if case .deliver(let user, let sealed, let address) = deliver(payload, to: user) {
                actions.append(.deliver(user: user, sealed, to: address))
            }
        }
        for (receiver, entry) in output.expired {
            actions += [.removeFromInbox(user: receiver, entry: entry)] + discard(user: receiver, entry, .expired)
        }
        return actions
    }

    /// Counts a discarded entry of `user`'s inbox and tells its sender, if connected here.
    private func discard(user: String, _ entry: InboxEntry, _ reason: InboxDiscardReason) -> [Action] {
        let message = entry.message
        let why: (RejectReason, SIMPMessage.ErrorCode, String) = reason == .full
            ? (.inboxFull, .inboxFull, "\(user)'s inbox is full; the message was discarded")
            : (.inboxExpired, .inboxExpired, "\(user) did not come back in time; the message was discarded")
        var actions: [Action] = [.reject(why.0, detail: "\(message.kind) \(message.messageId) from \(message.fromUser) to \(user)")]
        if message.kind.isContent, let sender = sessions[message.fromUser] {
            var error = SIMPMessage.error(why.1, why.2, messageId: message.messageId, to: message.fromUser)
            error.fromUser = user
            actions.append(.send(sender.connection, error))
        }
        return actions
    }
}
