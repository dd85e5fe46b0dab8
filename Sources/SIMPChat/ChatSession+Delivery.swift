import SIMPClient
import SIMPCore

/// What happens to the messages the user sent (submitted, stored, delivered, read, room
/// progress), room answers and connection changes.
extension ChatSession {
    /// The client took message `ref` as `messageId`: transmitted if connected, else it waits
    /// for the reconnect (and stays pending until then).
    public mutating func submitted(ref: Int, messageId: UInt64) -> [ChatEffect] {
        guard outgoing.markSubmitted(ref: ref, messageId: messageId, transmitted: isConnected) else { return [] }
        // A member's receipt can be counted before the post's id reaches the chat (it is
        // given once the post is on disk): that progress is shown now.
        if let progress = earlyRoomProgress.removeValue(forKey: messageId) { outgoing.resolve(ref: ref, progress) }
        if let index = history.lastIndex(where: { $0.id == messageId }) { // resent from the outbox: recorded already
            history[index].status = outgoing[ref].status.historyName
            showStatus(of: ref)
            return [.recordStatus(messageId: messageId, status: outgoing[ref].status.historyName)]
        }
        var entry = HistoryEntry(outgoing[ref].message, id: messageId)
        entry.status = outgoing[ref].status.historyName
        history.append(entry)
        showStatus(of: ref)
        return [.record(entry)]
    }

    /// News about a message the relay stored for an offline receiver: delivered later (✓✓) or
    /// discarded (✗ with the reason).
    public mutating func noticed(_ news: DeliveryNotice) -> [ChatEffect] {
        switch news {
        case .stored(let id, _, let receiverOnline):
            // Usually the send outcome said it already; not for a message whose outcome was
            // given up when the client stopped, and that went out after `/reconnect`.
            guard let ref = outgoing.messages.last(where: { $0.messageId == id })?.ref, !outgoing[ref].status.isFinal else { return [] }
            return update(ref: ref, receiverOnline ? .sentToDevices : .stored).effects
        case .roomProgress(let id, _, let delivered, let total):
            guard let ref = outgoing.messages.last(where: { $0.messageId == id })?.ref else {
                if earlyRoomProgress.count >= 256 { earlyRoomProgress = [:] } // never claimed: not ours
                earlyRoomProgress[id] = .roomDelivered(delivered, of: total)
                return []
            }
            // Progress on the way is shown only in place; a line off screen hears the total once.
            return update(ref: ref, .roomDelivered(delivered, of: total), quietly: delivered < total).effects
        case .read(let upTo, let reader):
            return markedRead(upTo: upTo, by: reader)
        case .fileReceived(let fileId, let receiver, _):
            return fileReceived(fileId: fileId, by: receiver)
        case .delivered(let id, _):
            guard let ref = outgoing.messages.last(where: { $0.messageId == id })?.ref else { return [] }
            let waited = Double(max(0, clock.now() - outgoing[ref].message.time))
            return resolved(ref: ref, .delivered(latencyMillis: waited))
        case .discarded(let id, _, _, let reason):
            guard let ref = outgoing.messages.last(where: { $0.messageId == id })?.ref else { return [] }
            return resolved(ref: ref, .failed(reason))
        case .delayed(_, let to, let waited):
            // Once per slow spell (until a message is settled again), not once per message;
            // never while the client has stopped (nothing is being tried: `connectionChanged`).
            guard !slowSpellReported, !isStopped else { return [] }
            slowSpellReported = true
            notice("no receipt from \(to) for \(waited / 1000) s; still trying (the relay or the link is slow)", .warning)
            return []
        }
    }

    /// The client answered a room request: the members, or why it failed.
    public mutating func roomAnswered(_ request: ChatRoomRequest, _ answer: Result<[String], ChatRoomError>) {
        switch (request, answer) {
        case (.watch, .failure): break // asked on the user's behalf: nothing to say
        case (_, .failure(let error)):
            notice("\(request): \(error.reason)", .failure)
        case (.join(let room), .success(let members)):
            peer = "#" + room
            roomMembers[room] = Set(members)
            for member in members { learnNames(member) }
            learnNames(peer!)
            notice("joined #\(room) (\(members.joined(separator: ", "))); plain lines go to the room", .dim)
        case (.leave(let room), .success):
            if peer == "#" + room { peer = nil }
            roomMembers[room] = nil
            notice("left #\(room)", .dim)
        case (.members(let room), .success(let members)):
            membersLearned(room, members)
            notice("#\(room): \(members.joined(separator: ", "))", .dim)
        case (.watch(let room), .success(let members)):
            membersLearned(room, members)
        case (.admit, .success):
            break // the end-to-end notice said who was admitted
        }
    }

    /// The outcome of message `ref` is known.
    public mutating func resolved(ref: Int, _ status: DeliveryStatus) -> [ChatEffect] {
        slowSpellReported = false
        let (status, asking) = roomPostStored(status, to: outgoing[ref].message.toUser)
        return update(ref: ref, status).effects + asking
    }

    /// The reader has seen the user's messages up to `upTo`. Marks on screen turn ✓✓ read in
    /// place; messages whose line is off screen change quietly (in the scrollback), with one
    /// summary line for all of them, never a line each.
    mutating func markedRead(upTo: UInt64, by reader: String) -> [ChatEffect] {
        var effects: [ChatEffect] = []
        var unseen: [Int] = []
        for ref in outgoing.messages.indices {
            let tracked = outgoing[ref]
            guard tracked.message.toUser == reader, let id = tracked.messageId, id <= upTo, tracked.status != .read,
                tracked.status.isDelivered || tracked.status.isInRelayCustody
            else { continue }
            let (more, shown) = update(ref: ref, .read, quietly: true)
            effects += more
            if !shown { unseen.append(ref) }
        }
        if let last = unseen.last {
            let summary = Self.followUpLine(outgoing[last], clock: clock)
            printLine(unseen.count == 1 ? summary : summary + StyledText(" and \(unseen.count - 1) earlier", .success))
        }
        return effects
    }

    /// Records message `ref`'s new status and shows it; `shown` is false when its line is off
    /// screen and, `quietly`, no follow-up line was printed.
    mutating func update(ref: Int, _ status: DeliveryStatus, quietly: Bool = false) -> (effects: [ChatEffect], shown: Bool) {
        // A late "stored" never undoes news that the stored message was delivered meanwhile.
        if status.isInRelayCustody, outgoing[ref].status.isDelivered || outgoing[ref].status.isRoomProgress { return ([], true) }
        outgoing.resolve(ref: ref, status)
        let shown = showStatus(of: ref, quietly: quietly)
        var effects: [ChatEffect] = []
        if let id = outgoing[ref].messageId ?? outgoing[ref].historyId {
            if let index = history.lastIndex(where: { $0.id == id }) { history[index].status = status.historyName }
            effects.append(.recordStatus(messageId: id, status: status.historyName))
        }
        if draining, outgoing.unresolvedCount == 0 { effects += quit(status: exitStatus) }
        return (effects, shown)
    }

    /// The client's connection state changed.
    public mutating func connectionChanged(_ state: ConnectionState) {
        connection = state
        switch state {
        case .connecting:
            output += screen.draw(inputLine)
        case .connected(let relayId):
            let place = (device.map { "device \($0), " } ?? "") + "relay \(relayId)"
            notice(hasConnected ? "reconnected (\(place))" : "connected as \(user) (\(place))", .success)
            hasConnected = true
            for ref in outgoing.markResumed() { showStatus(of: ref) }
        case .reconnecting(let attempt, let delay):
            let what = attempt == 1 ? "connection lost" : "relay still unreachable"
            notice("\(what); reconnecting in \(Self.seconds(delay)) (attempt \(attempt))", .warning)
        case .offline(let reason):
            notice("offline: \(reason)", .failure)
            notice(Self.stoppedAdvice, .warning)
            for ref in outgoing.messages.indices where outgoing[ref].status == .sent { // nothing retransmits them now
                outgoing.resolve(ref: ref, .pending)
                showStatus(of: ref, quietly: true)
            }
        }
    }

    /// What a stopped client does with messages, and what the user can do.
    static let stoppedAdvice = "messages you type wait in the outbox; /reconnect tries again (or start simp again later)"

    /// Whether the client stopped for good (it does not reconnect by itself).
    var isStopped: Bool {
        if case .offline = connection { return true }
        return false
    }

    /// `/reconnect`: only the client that stopped is asked; otherwise says what is going on.
    mutating func reconnectAsked() -> [ChatEffect] {
        switch connection {
        case .offline: return [.reconnect]
        case .connected: notice("already connected", .dim)
        case .connecting, .reconnecting: notice("already reconnecting by itself (/status says how)", .dim)
        }
        return []
    }

    /// The client's datagrams moved to `path` (docs/PROTOCOL.md §5.5): said once a session when
    /// UDP turns out to be blocked; `/status` shows the path at any time.
    public mutating func datagramPathChanged(_ path: DatagramPath) {
        datagramPath = path
        guard path == .control, !saidUDPBlocked else { return }
        saidUDPBlocked = true
        notice(Self.udpBlockedText, .warning)
    }

    static let udpBlockedText = "UDP is blocked on this network; messages go over the control connection"

    /// `/status`: the connection, and the way messages go.
    mutating func showConnectionStatus() {
        let state = MessageFormatting.stateLine(connection) ?? "connecting"
        guard isConnected else {
            // No path is in use: say what happens to messages instead.
            let waiting = outgoing.unresolvedCount
            let pending = waiting == 0 ? "" : "; \(waiting) message\(waiting == 1 ? "" : "s") not yet delivered"
            let next = isStopped ? Self.stoppedAdvice : "messages you type are sent once it is back"
            notice("\(state)\(pending); \(next)", isStopped ? .failure : .dim)
            return
        }
        let path = datagramPath == .udp ? "messages go over UDP" : Self.udpBlockedText
        notice("\(state); \(path)", .dim)
    }
}
