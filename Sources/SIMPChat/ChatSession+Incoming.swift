import SIMPClient
import SIMPCore

/// Messages, presence and typing from others.
extension ChatSession {
    /// A message delivered to this user (already in the history file: `ChatHistory` records it
    /// before its receipt). A direct message from the current peer is seen at once (a read
    /// marker goes back); from anyone else when the user switches to them.
    public mutating func receive(_ message: SIMPMessage) -> [ChatEffect] {
        let entry = HistoryEntry(message)
        history.append(entry)
        typingSince[message.fromUser] = nil
        learnNames(message.fromUser)
        if newMarkerPending {
            newMarkerPending = false
            printLine(StyledText("— new —", .warning))
        }
        if message.fromUser != peer {
            unreadCounts[message.fromUser, default: 0] += 1
            if rings, screen.interactive, message.author.isEmpty { output += "\u{7}" } // the bell: a message to you elsewhere
        }
        printLine(Self.messageLine(entry, user: user, clock: clock))
        var effects: [ChatEffect] = []
        if sendsReadMarkers, message.author.isEmpty, !RelayCore.isRoomAddress(message.fromUser) {
            if message.fromUser == peer {
                effects.append(.markRead(from: message.fromUser, upTo: message.messageId))
            } else {
                unread[message.fromUser] = max(unread[message.fromUser] ?? 0, message.messageId)
            }
        }
        return effects
    }

    /// News about a peer: typing (shown in the prompt for a few seconds) or presence.
    public mutating func peerEvent(_ event: PeerEvent) {
        switch event {
        case .typing(let from):
            typingSince[from] = clock.now()
            output += screen.draw(inputLine)
        case .presence(let who, let online, _):
            notice("\(who) is \(online ? "online" : "offline")", .dim)
        }
    }

    /// The client answered a WHO.
    public mutating func whoAnswered(_ entries: Result<[PresenceEntry], ChatRoomError>, show: Bool) {
        guard show else { return }
        switch entries {
        case .failure(let error): notice("/who: \(error.reason)", .failure)
        case .success(let entries):
            for entry in entries {
                guard entry.lastSeen >= 0 else { // the relay's answer for a user that does not exist
                    notice("\(entry.user): no such user", .failure)
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
        guard !RelayCore.isRoomAddress(peer) else { return [] }
        var effects: [ChatEffect] = [.who(users: [peer], room: nil, show: false)]
        if sendsReadMarkers, let id = unread.removeValue(forKey: peer) { effects.append(.markRead(from: peer, upTo: id)) }
        return effects
    }
}
