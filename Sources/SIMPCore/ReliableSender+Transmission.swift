import DequeModule
import HeapModule
import NIOCore

/// Transmissions and outcomes: moving waiting messages into flight, paced retransmissions,
/// the floor each transmission carries, give-up times and delay notices, and settling a
/// message once its outcome is known.
extension ReliableSender {
    /// Sends pending message `id` again in `copies` copies, now if the pacer allows, else once
    /// it does (after the retransmissions already waiting for it).
    mutating func retransmitPaced(_ id: UInt64, copies: Int, now: NIODeadline, into output: inout SenderOutput) {
        guard pacer != nil else { return retransmit(id, copies: copies, now: now, into: &output) }
        guard !pacedIds.contains(id) else { return }
        if paced.isEmpty, pacer!.take(now: now) { return retransmit(id, copies: copies, now: now, into: &output) }
        paced.append((id, copies))
        pacedIds.insert(id)
    }

    /// Sends the retransmissions waiting for the pacer while it allows (dropping settled ones).
    private mutating func sendPaced(now: NIODeadline, into output: inout SenderOutput) {
        while let next = paced.first {
            if pending[next.id] != nil {
                guard pacer?.take(now: now) ?? true else { return }
                retransmit(next.id, copies: next.copies, now: now, into: &output)
            }
            paced.removeFirst()
            pacedIds.remove(next.id)
        }
    }

    /// Sends pending message `id` again, in `copies` copies.
    private mutating func retransmit(_ id: UInt64, copies: Int, now: NIODeadline, into output: inout SenderOutput) {
        retransmits += 1
        let message = transmit(id, now: now)
        let copies = max(1, copies)
        output.transmit.append(contentsOf: repeatElement(message, count: copies))
        extraCopiesSent += copies - 1
    }

    /// A pending or waiting message has its outcome: its deadlines end, its seq is resolved.
    mutating func settle(_ message: SIMPMessage, now: NIODeadline) {
        unsettled[message.messageId] = nil
        pastTimeLimit.remove(message.messageId)
        lastChanceEnds[message.messageId] = nil
        refusedAsFull[message.messageId] = nil
        resolve(message, now: now)
        while let first = submissions.first, unsettled[first.id] == nil {
            submissions.removeFirst()
            delaysNoticed = max(0, delaysNoticed - 1)
        }
    }

    /// Gives up every message submitted `giveUpAfter` or longer ago (they are the oldest, at the
    /// front of `submissions`): a waiting one fails now; one in flight when its transmission's
    /// timer fires unanswered. While suspended, a message first sent when the path still worked
    /// (its receipt may have been lost with the path) is resent after the reconnect and fails
    /// only if that goes unanswered too; the others fail now.
    mutating func expire(now: NIODeadline, into output: inout SenderOutput) {
        while let first = submissions.first, unsettled[first.id] == nil || first.at + policy.giveUpAfter <= now {
            submissions.removeFirst()
            delaysNoticed = max(0, delaysNoticed - 1)
            guard unsettled[first.id] != nil else { continue }
            if let entry = pending[first.id], !isSuspended || lastReceiptedSend.map({ entry.sentAt[0] <= $0 + estimator.rto }) == true {
                pastTimeLimit.insert(first.id) // it may still be answered: fails at its next timer
                continue
            }
            unsettled[first.id] = nil
            var attempts = 0
            if let entry = pending.removeValue(forKey: first.id) {
                attempts = entry.attempts
                resolve(entry.message, now: now)
            } else if let index = waiting.firstIndex(where: { $0.messageId == first.id }) {
                resolve(waiting.remove(at: index), now: now)
            }
            let failure = timeLimitFailure(first.id, attempts: attempts)
            output.events.append(.failed(messageId: first.id, to: first.to, failure))
        }
    }

    /// Why message `id` fails at its time limit: the full inbox that refused it, or no receipt.
    mutating func timeLimitFailure(_ id: UInt64, attempts: Int) -> DeliveryFailure {
        guard let reason = refusedAsFull.removeValue(forKey: id) else { return .expired(after: policy.giveUpAfter, attempts: attempts) }
        return .rejected(.inboxFull, reason)
    }

    /// Reports, once each, the messages that passed `delayNoticeAfter` without an outcome.
    mutating func noticeDelays(now: NIODeadline, into output: inout SenderOutput) {
        while delaysNoticed < submissions.count {
            let next = submissions[delaysNoticed]
            guard next.at + policy.delayNoticeAfter <= now else { return }
            delaysNoticed += 1
            if unsettled[next.id] != nil { output.delayed.append(DelayedMessage(messageId: next.id, to: next.to, waited: now - next.at)) }
        }
    }

    /// Marks a message's seq as no longer awaited, so later messages carry a higher floor. When
    /// the floor reaches held messages, the receiver has nothing left to wait for below them:
    /// their final receipts are due within a round trip, so they are sent again one RTO from now
    /// unless those come (a receiver that restarted lost them; the maximum RTO is long to wait).
    mutating func resolve(_ message: SIMPMessage, now: NIODeadline) {
        guard var conversation = conversations[message.toUser] else { return }
        conversation.held[message.seq] = nil
        conversation.stored.remove(message.seq)
        conversation.resolved.insert(message.seq)
        var seq = conversation.floor()
        conversations[message.toUser] = conversation
        while let id = conversation.held[seq], let entry = pending[id] {
            let deadline = now + estimator.rto
            if let timer = entry.timerDeadline, timer > deadline {
                pending[id]!.timerDeadline = deadline
                timers.insert(Timer(deadline: deadline, messageId: id, attempt: entry.attempts))
            }
            seq += 1
        }
    }

    /// Records a transmission of pending message `id` (stamped with the conversation's current
    /// floor and custody floor) and arms its timer.
    private mutating func transmit(_ id: UInt64, now: NIODeadline) -> SIMPMessage {
        let index = pending.index(forKey: id)!
        let floor = floorForTransmission(at: index)
        // The relay delivering stored messages passes on the custody floor they were stored with.
        let custodyFloor = keepsSenderSequence ? nil : conversations[pending.values[index].message.toUser]?.custodyFloor()
        let attempts = pending.values[index].attempts + 1
        let timeout = pending.values[index].isHeld ? policy.maximumRTO : estimator.timeout(forAttempt: attempts, backoff: policy.backoff)
        timers.insert(Timer(deadline: now + timeout, messageId: id, attempt: attempts))
        return pending.values[index].recordTransmission(at: now, floor: floor, custodyFloor: custodyFloor, timerDeadline: now + timeout)
    }

    /// The floor the next transmission of the pending message at `index` carries; nil: the
    /// one it has (see `Pending.computesFloor`).
    private mutating func floorForTransmission(at index: Dictionary<UInt64, Pending>.Index) -> UInt64? {
        let peer = pending.values[index].message.toUser
        guard keepsSenderSequence else { return conversations[peer]?.floor() ?? 0 }
        guard pending.values[index].computesFloor else { return nil }
        let stream = pending.values[index].message.stream
        var lowestPending = pending.values[index].message.seq
        for other in pending.values where other.message.toUser == peer && other.message.stream == stream {
            lowestPending = min(lowestPending, other.message.seq)
        }
        return min(pending.values[index].originalFloor ?? lowestPending, lowestPending)
    }

    /// Sends the retransmissions waiting for the pacer, then moves waiting messages into flight
    /// while they fit in the id window and the pacer allows.
    mutating func releaseWaiting(now: NIODeadline, into output: inout SenderOutput) {
        guard !isSuspended else { return }
        sendPaced(now: now, into: &output)
        guard paced.isEmpty else { return }
        while let front = sendOrder.first, pending[front] == nil { sendOrder.removeFirst() }
        while let nextId = waiting.first?.messageId {
            if let oldest = sendOrder.first, nextId >= oldest, nextId - oldest >= policy.maxIdSpan {
                break
            }
            guard pacer?.take(now: now) ?? true else { break }
            let next = waiting.removeFirst()
            let originalFloor = next.floor == 0 ? nil : next.floor
            pending[nextId] = Pending(message: next, computesFloor: keepsSenderSequence, originalFloor: originalFloor)
            sendOrder.append(nextId)
            output.transmit.append(transmit(nextId, now: now))
        }
    }
}
