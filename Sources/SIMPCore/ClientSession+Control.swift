import NIOCore

/// The control connection: frames arriving on it once registered (receipts, errors, presence,
/// pings), and its loss.
extension ClientSession {
    /// The registered control connection is gone. Sending is suspended; with a reconnect
    /// policy (and `mayReconnect`, and not `stopped`), `reconnect` says when to try again.
    /// `random` is in [0, 1).
    public mutating func controlLost(mayReconnect: Bool, random: Double) -> Output {
        // No gap can be repaired until registered again: the hold limit stops counting (§6.5).
        if let lastHeard = phase.registration?.heartbeat.lastHeard { receiver.stopHoldClock(since: lastHeard) }
        phase = .disconnected
        paths?.controlLost()
        for batch in batcher.flush(now: .distantPast) { receipts.couldNotWrite(batch) } // sent after the next login
        receipts.connectionLost()
        sender.suspend()
        var output = mayReconnect ? connectAttemptFailed(random: random) : Output()
        output.replies = abandonRequests()
        return output
    }

    /// A connect attempt (TCP or CONNECT) failed: plan the next one, if reconnecting and the
    /// relay did not refuse the login (`stopped`).
    public mutating func connectAttemptFailed(random: Double) -> Output {
        var output = Output()
        if stopped == nil { output.reconnect = backoff?.next(random: random) }
        return output
    }

    /// A frame arrived on the registered control connection.
    public mutating func controlReceived(_ message: SIMPMessage, now: NIODeadline) -> Output {
        updateRegistration {
            $0.heartbeat.heard(at: now)
            $0.holdingHeartbeat.heard(at: now)
        }
        var output = Output()
        output.replies = takeAlsoRefused(message, now: now)
        if let reply = takeReply(message, now: now) {
            output.replies.append(reply)
            return output
        }
        switch message.kind {
        case .datagram:
            return datagramArrived(ByteBuffer(bytes: message.datagram), arrivedAt: now, now: now, over: .control)
        case .receipt where message.status == .stored || message.status == .roomDelivered:
            // The receiver is offline, or it is a room post: the message is settled (no more
            // retries), not delivered.
            // A direct message stays unresolved until it is delivered from the inbox (order).
            let settled =
                message.room.isEmpty && message.status == .stored
                ? sender.handleStored(message, now: now) : sender.handleReceipt(message, now: now)
            output.datagrams += settled.transmit
            for event in settled.events {
                guard case .delivered(let id, let to, _, _) = event else { output.outcomes.append(event); continue }
                output.notices.append(.stored(messageId: id, to: to, receiverOnline: message.receiverOnline))
            }
            if message.status == .stored, !message.room.isEmpty, message.seq != 0 {
                // The room does not send this user its own post: nothing waits for its number.
                release(receiver.skip(message.seq, from: "#\(message.room)", stream: RelayCore.roomStream, now: now), now: now, into: &output)
            }
            if message.status == .roomDelivered {
                output.notices.append(
                    .roomProgress(
                        messageId: message.messageId, room: message.room,
                        delivered: Int(message.deliveredCount), of: Int(message.memberCount)))
            }
        case .receipt:
            let ids = [message.messageId] + message.receiptIds // a batch covers several (§6.1)
            let wasPending = ids.map { sender.isPending($0) }
            output.absorb(receiptHandled(message, now: now))
            guard !message.held else { break } // arrived, not yet delivered: a final receipt follows
            // A stored message counts as delivered when the inbox delivered it, or when the
            // receiver receipts it directly (it had an earlier copy whose receipt was late).
            for (id, wasPending) in zip(ids, wasPending) {
                let settled =
                    message.status == .deliveredFromInbox ? sender.storedMessageSettled(id, now: now) : sender.storedMessageReceipted(id, now: now)
                if !wasPending, message.status == .deliveredFromInbox || settled {
                    output.notices.append(.delivered(messageId: id, to: message.fromUser))
                }
            }
        case .error where message.errorCode == .alreadyConnected && message.messageId == 0:
            stopped = .takenOver(reason: message.errorText) // the relay closes the connection next
        case .error where message.errorCode == .tokenSessionExpired && message.messageId == 0:
            stopped = .tokenExpired(reason: message.errorText) // the relay closes the connection next
        case .error where message.errorCode == .rateLimited:
            throttleNotices += 1 // the message stays pending: sent again when the pacer allows
            sender.rateLimited(messageId: message.messageId, retryAfter: .milliseconds(Int64(message.retryAfterMillis)), now: now)
        case .read:
            output.notices.append(.read(upTo: message.messageId, by: message.fromUser))
        case .presence:
            output.peerEvents.append(.presence(user: message.fromUser, online: message.online, lastSeen: message.lastSeen))
        case .error where message.errorCode == .inboxFull && sender.isPending(message.messageId):
            // The receiver's log is full and did not take it: sent again later, fails only at its time limit (§6.2).
            sender.refusedAsFull(messageId: message.messageId, reason: message.errorText)
        case .error where message.errorCode == .inboxFull || message.errorCode == .inboxExpired:
            sender.storedMessageSettled(message.messageId, now: now)
            // A stored copy of a message its receiver already receipted: nothing was lost.
            guard !sender.wasDeliveredAfterStoring(message.messageId) else { break }
            output.notices.append(.discarded(messageId: message.messageId, to: message.fromUser, message.errorCode, message.errorText))
        case .error where message.messageId != 0 && sender.isPending(message.messageId):
            output.absorb(
                sender.handleRejection(
                    messageId: message.messageId, code: message.errorCode, reason: message.errorText, now: now))
        case .fileAck where message.fileReceived:
            // The relay says a device of the receiver has a file it held, whole and verified (§5.7).
            output.notices.append(.fileReceived(fileId: message.fileId, by: message.fromUser, device: message.device))
        case .pong:
            receipts.pongArrived(message.messageId)
        case .ping:
            var pong = SIMPMessage(kind: .pong, messageId: message.messageId)
            pong.time = message.time
            output.controlFrames.append(pong)
        default:
            break
        }
        return output
    }
}
