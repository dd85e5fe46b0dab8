import SIMPClient
import SIMPCore

/// Messages, presence and typing from others.
extension ChatSession {
    /// A message delivered to this user (already in the history file: `ChatHistory` records it
    /// before its receipt). A direct message from the current peer is seen at once (a read
    /// marker goes back) if the view shows the newest lines; otherwise when the user returns
    /// to them (PageDown to the end, or sending), or, from anyone else, switches to its sender.
    public mutating func receive(_ message: SIMPMessage) -> [ChatEffect] {
        if message.fileId != 0, message.isEndToEnd { return fileAnnounced(message) }
        var entry = HistoryEntry(received: message)
        if keyChangedPeers.contains(message.fromUser) { entry.keyChanged = true }
        history.append(entry)
        typingSince[message.fromUser] = nil
        learnNames(message.fromUser)
        showNewMarker()
        let asking = roomPostArriving(message)
        // With no one to talk to, a direct message makes its sender the one replies go to.
        let isDirect = message.author.isEmpty && !RelayCore.isRoomAddress(message.fromUser)
        let adopted = peer == nil && isDirect
        if adopted { peer = message.fromUser }
        countUnread(from: message.fromUser, ringing: message.author.isEmpty)
        printLine(Self.messageLine(entry, user: user, clock: clock))
        var effects = asking
        if adopted { effects += repliesGo(to: message.fromUser) }
        if sendsReadMarkers, message.author.isEmpty, !RelayCore.isRoomAddress(message.fromUser) {
            if message.fromUser == peer, screen.scrolledBack == 0 {
                effects.append(.markRead(from: message.fromUser, upTo: message.messageId))
            } else { // not on screen: scrolled back, or another conversation
                unread[message.fromUser] = max(unread[message.fromUser] ?? 0, message.messageId)
            }
        }
        return effects
    }

    /// The "— new —" line, before the first message (or file) that arrives after the history
    /// shown at start.
    mutating func showNewMarker() {
        guard newMarkerPending else { return }
        newMarkerPending = false
        printLine(StyledText("— new —", .warning))
    }

    /// Something arrived from `sender`: counted in the prompt unless it is the current peer,
    /// and, `ringing` (sent to this user, not a room post), the terminal bell rung.
    mutating func countUnread(from sender: String, ringing: Bool) {
        guard sender != peer else { return }
        unreadCounts[sender, default: 0] += 1
        if rings, screen.interactive, ringing { output += "\u{7}" } // the bell: a message to you elsewhere
    }

    /// `sender` became the one replies go to (the chat had no one to talk to): says so and
    /// follows them.
    mutating func repliesGo(to sender: String) -> [ChatEffect] {
        notice("replies go to \(sender) (/to NAME to talk to someone else)", .dim)
        return peerChosen()
    }

    /// News about a peer: typing (shown in the prompt for `typingWindow`: the `.wake` effect
    /// asks for the `clockTicked()` that takes it away) or presence.
    @discardableResult
    public mutating func peerEvent(_ event: PeerEvent) -> [ChatEffect] {
        switch event {
        case .typing(let from):
            typingSince[from] = clock.now()
            output += screen.draw(inputLine)
            return [.wake(afterMillis: Self.typingWindow)]
        case .presence(let who, let online, _):
            notice("\(who) is \(online ? "online" : "offline")", .dim)
            return []
        }
    }

    /// Time passed (a `.wake` came due): typing indicators older than `typingWindow` are
    /// dropped, and the prompt redrawn if it showed one.
    public mutating func clockTicked() {
        let now = clock.now()
        let expired = typingSince.filter { now - $0.value >= Self.typingWindow }.map(\.key)
        guard !expired.isEmpty else { return }
        for user in expired { typingSince[user] = nil }
        if let peer, expired.contains(peer) { output += screen.draw(inputLine) }
    }

    /// The view shows the newest lines again: what the current peer sent meanwhile is seen.
    mutating func markSeenIfAtNewest() -> [ChatEffect] {
        guard screen.scrolledBack == 0, sendsReadMarkers, let peer, let id = unread.removeValue(forKey: peer) else { return [] }
        return [.markRead(from: peer, upTo: id)]
    }

    /// The client answered a WHO.
    public mutating func whoAnswered(_ entries: Result<[PresenceEntry], ChatRoomError>, show: Bool) {
        guard show else { return }
        switch entries {
        case .failure(let error): notice("/who: \(error.reason)", .failure)
        case .success(let entries):
            for entry in entries {
                // The relay's answer for a user it does not show: no conversation or room shared,
                // presence off, or no such user (the same answer for each).
                guard entry.lastSeen >= 0 else {
                    notice("no presence information for \(entry.user)", .dim)
                    continue
                }
                learnNames(entry.user)
                let seen = entry.lastSeen > 0 ? ", last seen \(clock.format(entry.lastSeen))" : ", never seen"
                notice("\(entry.user): " + (entry.online ? "online" : "offline" + seen), .dim)
            }
        }
    }

    /// (Re)connected: follow the current peer's presence again (the relay forgets followers
    /// when they disconnect).
    public mutating func followCurrentPeer() -> [ChatEffect] { peerChosen() }

    /// The current peer changed: what it sent is now seen, and its presence is followed.
    mutating func peerChosen() -> [ChatEffect] {
        guard let peer else { return [] }
        learnNames(peer)
        unreadCounts[peer] = nil
        output += screen.draw(inputLine)
        guard !RelayCore.isRoomAddress(peer) else { return [.room(.watch(String(peer.dropFirst())))] }
        var effects: [ChatEffect] = [.who(users: [peer], room: nil, show: false)]
        if sendsReadMarkers, let id = unread.removeValue(forKey: peer) { effects.append(.markRead(from: peer, upTo: id)) }
        return effects
    }
}
