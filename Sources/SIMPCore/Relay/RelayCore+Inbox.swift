import NIOCore

/// The offline inbox: messages for a known user without a session are stored (the sender gets
/// a STORED receipt); when the user connects the relay delivers them as their retransmitting
/// sender (`InboxCore`) and tells each original sender when its message arrived.
extension RelayCore {
    /// A content datagram for a known user without a route: store it in the user's inbox.
    func storeOffline(_ bytes: ByteBuffer, _ header: DatagramHeader, into output: inout [RelayAction]) {
        guard let message = try? MessageCodec.decode(bytes) else {
            return output.append(.reject(.malformed, detail: "datagram for offline \(header.toUser) does not decode"))
        }
        output.append(.store(.storeInInbox(user: message.toUser, message: message)))
    }

    /// The store answered a `.storeInInbox` for `user`: the message is reported stored
    /// (`RelayEvent.inboxStored`, the first time), then the sender of a stored message learns it
    /// is stored, the sender of a message the full log refused that it may try again later; the
    /// senders of expired entries learn they were discarded. A content entry
    /// for a user connected here (a room copy, or a store that crossed the user's connect)
    /// goes out now; for a user elsewhere, its relay hands it over.
    mutating func inboxStored(
        user: String, message: SIMPMessage, _ result: Result<(InboxEntry, InboxStoreResult), StoreFailure>, now: NIODeadline,
        into output: inout [RelayAction]
    ) {
        guard case .success(let (entry, stored)) = result else {
            return output.append(.reject(.inboxUnavailable, detail: "\(message.fromUser) -> \(user) (\(message.kind))"))
        }
        for discarded in stored.discarded { discard(user: user, discarded.entry, discarded.reason, into: &output) }
        guard !stored.refused else { return refuseFull(user: user, message, into: &output) }
        if !stored.duplicate {
            // Durable now: said before anything tells its sender so (the STORED receipt below).
            output.append(.event(.inboxStored(InboxStored(user: user, from: message.fromUser, messageId: message.messageId, kind: message.kind))))
        }
        if !stored.duplicate, message.kind.isContent {
            for device in sessions.receivers(of: user) { handOver(entry, to: device, now: now, into: &output) }
        }
        if message.kind.isContent, sessions.contains(message.fromUser) {
            // The datagram's attempt: the sender's RTT sample of what it waits for once the
            // relay takes custody (sender -> relay -> store -> sender).
            var receipt = message.receipt(holdMicros: 0)
            receipt.status = .stored
            // Not offline: a device of the receiver, here or on another relay, gets the entry now.
            receipt.receiverOnline = sessions.hasReceiver(user) || routes.hasReceivers(user, now: now)
            timers.receiptRouted(now: now)
            for sender in sessions.connections(of: message.fromUser) { output.append(.send(sender, receipt)) }
        }
        if !stored.duplicate, !sessions.hasReceiver(user) || sessions.isElsewhere(user) {
            // Devices of the user may be connected to other relays: they hand the entry over now.
            routeRemote(.inboxEntry(entry), to: user, now: now, into: &output)
        }
    }

    /// An entry just stored for `user`'s receiving device `device`, connected here, goes out
    /// now. A room copy makes the relay read the device's whole inbox again instead: copies
    /// stored by different relays may arrive out of the room's order, and reading them sorted
    /// keeps one order for everyone.
    mutating func handOver(_ entry: InboxEntry, to device: Recipient, now: NIODeadline, into output: inout [RelayAction]) {
        guard !Self.isRoomAddress(entry.message.fromUser) else {
            return output.append(.store(.loadInbox(user: device.user, device: device.device)))
        }
        inboxActions(inbox.enqueue(entry, for: device, now: now), into: &output)
    }

    /// The store answered a `.loadInbox`: delivery to the device starts (if it is still
    /// connected); a failed read is tried again after `inboxRetryDelay`.
    mutating func inboxLoaded(
        _ device: Recipient, _ result: Result<(entries: [InboxEntry], wallNow: Int64, earlier: [InboxEntry]), StoreFailure>, now: NIODeadline,
        into output: inout [RelayAction]
    ) {
        guard sessions.receivingSession(of: device.user, device: device.device) != nil else { return }
        guard case .success(let (entries, wallNow, earlier)) = result else {
            timers.loadInbox(of: device, at: now + configuration.inboxRetryDelay)
            return
        }
        _ = timers.takeInboxLoad(of: device) // read now: nothing waits any more
        inboxActions(inbox.loaded(user: device, entries: entries, earlier: earlier, wallNow: wallNow, now: now), into: &output)
    }

    /// Turns what `InboxCore` decided into actions.
    mutating func inboxActions(_ decided: InboxCore.Output, into output: inout [RelayAction]) {
        for (user, message) in decided.datagrams {
            if let delivery = sessions.seal(message, for: user) { output.append(delivery) }
        }
        for (user, entry) in decided.receipts {
            guard let session = sessions.receivingSession(of: user.user, device: user.device),
                let connection = sessions.connection(ofSession: session)
            else { continue }
            output += [.send(connection, entry.message), .store(.removeFromInbox(user: user.user, entry: entry, device: user.device))]
        }
        for (receiver, entry) in decided.delivered {
            output.append(.store(.removeFromInbox(user: receiver.user, entry: entry, device: receiver.device)))
            if Self.isRoomAddress(entry.message.fromUser) {
                output.append(.store(.countRoomDelivery(copy: entry.message)))
                continue
            }
            var receipt = entry.message.receipt(holdMicros: 0)
            receipt.attempt = 0
            receipt.status = .deliveredFromInbox
            for sender in sessions.connections(of: receipt.toUser) { output.append(.send(sender, receipt)) }
            if !sessions.contains(receipt.toUser) || sessions.isElsewhere(receipt.toUser) {
                output.append(.store(.storeInInbox(user: receipt.toUser, message: receipt)))
            }
        }
        for (user, payload) in decided.released {
            if let delivery = sessions.seal(payload, for: user) { output.append(delivery) }
        }
        for (receiver, entry) in decided.expired {
            output.append(.store(.removeFromInbox(user: receiver.user, entry: entry, device: receiver.device)))
            discard(user: receiver.user, entry, .expired, into: &output)
        }
    }

    /// Counts a discarded (expired) entry of `user`'s inbox and tells its sender, if connected here.
    private func discard(user: String, _ entry: InboxEntry, _ reason: InboxDiscardReason, into output: inout [RelayAction]) {
        tellSender(
            entry.message, .inboxExpired, .inboxExpired, "\(user) did not come back in time; the message was discarded", user: user, into: &output)
    }

    /// `user`'s log is full and refused `message` (nothing stored was dropped): counted, and its
    /// sender, if connected here, gets ERROR INBOX_FULL naming it. The sender keeps it and sends it
    /// again later, until its own time limit (docs/PROTOCOL.md §6.2, §6.6).
    private func refuseFull(user: String, _ message: SIMPMessage, into output: inout [RelayAction]) {
        tellSender(message, .inboxFull, .inboxFull, "\(user)'s inbox is full; try again later", user: user, into: &output)
    }

    private func tellSender(
        _ message: SIMPMessage, _ reason: RejectReason, _ code: SIMPMessage.ErrorCode, _ text: String, user: String, into output: inout [RelayAction]
    ) {
        output.append(.reject(reason, detail: "\(message.kind) \(message.messageId) from \(message.fromUser) to \(user)"))
        guard message.kind.isContent else { return }
        var error = SIMPMessage.error(code, text, messageId: message.messageId, to: message.fromUser)
        error.fromUser = user
        for sender in sessions.connections(of: message.fromUser) { output.append(.send(sender, error)) }
    }
}
