import NIOCore

/// Who follows whose presence on this relay (a local user whose WHO was answered with a user's
/// presence is told when that user comes or goes, until the follower leaves), which local users
/// turned presence off, and which conversations were noted in the store lately.
public struct PresenceCore: Sendable {
    private var watchers: [String: Set<String>] = [:]
    private var hiddenUsers: Set<String> = []
    private var notedContacts: [Contact: NIODeadline] = [:]

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

    /// Whether `user`'s content to `peer` is to be noted in the store now: not when it was
    /// within `contactRenewal`.
    public mutating func notesContact(from user: String, to peer: String, now: NIODeadline) -> Bool {
        let contact = Contact(user: user, peer: peer)
        if let noted = notedContacts[contact], now < noted + Self.contactRenewal { return false }
        if notedContacts.count >= Self.maxNotedContacts { notedContacts.removeAll(keepingCapacity: true) }
        notedContacts[contact] = now
        return true
    }
}
