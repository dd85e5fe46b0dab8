import NIOCore

/// Who follows whose presence on this relay (a local user whose WHO was answered with a user's
/// presence is told when that user comes or goes, until the follower leaves), which local users
/// turned presence off, and which conversations were noted in the store lately.
public struct PresenceCore: Sendable {
    private var watchers: [String: Set<String>] = [:]
    private var hiddenUsers: Set<String> = []
    private var notedContacts: [Contact: NIODeadline] = [:]
    /// The peer each sending session's content was last noted for, and when: a session writing
    /// to the same peer again is answered here by its id, without hashing both names (the
    /// data path asks for every content datagram). Forgotten with `notedContacts`.
    private var lastNotedBySession: [UInt64: NotedPeer] = [:]

    private struct NotedPeer: Sendable {
        var peer: String
        var noted: NIODeadline
    }

    /// A sender and the user it sent content to.
    private struct Contact: Hashable, Sendable {
        var user: String
        var peer: String
    }

    /// How often one sender's content to one peer is noted in the store again (the store keeps
    /// the newest peers of each user; noting again keeps an ongoing conversation among them).
    public static let contactRenewal: TimeAmount = .hours(1)
    /// At most this many noted conversations are remembered (then all are forgotten, and the
    /// next content of each is noted again).
    public static let maxNotedContacts = 10_000

    public init() {}

    /// `follower` was shown the presence of `users`.
    public mutating func follow(_ users: [String], by follower: String) {
        for user in users where user != follower { watchers[user, default: []].insert(follower) }
    }

    /// The local users following `user`.
    public func followers(of user: String) -> Set<String> { watchers[user] ?? [] }

    /// `follower` left this relay: it stops following `user`.
    public mutating func unfollow(_ user: String, by follower: String) {
        watchers[user]?.remove(follower)
        if watchers[user]?.isEmpty == true { watchers[user] = nil }
    }

    /// A receiving session of `user` logged in here, with presence off (`hidden`) or on: the
    /// user's latest login decides.
    public mutating func loggedIn(_ user: String, hidden: Bool) {
        if hidden { hiddenUsers.insert(user) } else { hiddenUsers.remove(user) }
    }

    /// Whether `user`'s latest receiving login here turned presence off.
    public func isHidden(_ user: String) -> Bool { hiddenUsers.contains(user) }

    /// `user`'s last receiving session here ended.
    public mutating func left(_ user: String) { hiddenUsers.remove(user) }

    /// Whether `user`'s content to `peer`, sent by `user`'s session `session`, is to be noted in
    /// the store now: not when it was within `contactRenewal`.
    public mutating func notesContact(from user: String, to peer: String, session: UInt64, now: NIODeadline) -> Bool {
        if let last = lastNotedBySession[session], last.peer == peer, now < last.noted + Self.contactRenewal { return false }
        let contact = Contact(user: user, peer: peer)
        if let noted = notedContacts[contact], now < noted + Self.contactRenewal {
            remember(peer, noted: noted, by: session)
            return false
        }
        if notedContacts.count >= Self.maxNotedContacts {
            notedContacts.removeAll(keepingCapacity: true)
            lastNotedBySession.removeAll(keepingCapacity: true)
        }
        notedContacts[contact] = now
        remember(peer, noted: now, by: session)
        return true
    }

    private mutating func remember(_ peer: String, noted: NIODeadline, by session: UInt64) {
        if lastNotedBySession.count >= Self.maxNotedContacts, lastNotedBySession[session] == nil {
            lastNotedBySession.removeAll(keepingCapacity: true)
        }
        lastNotedBySession[session] = NotedPeer(peer: peer, noted: noted)
    }
}
