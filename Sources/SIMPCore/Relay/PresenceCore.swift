/// Who follows whose presence on this relay: a local user who asked WHO about a user is told
/// when that user comes or goes, until the follower leaves.
public struct PresenceCore: Sendable {
    private var watchers: [String: Set<String>] = [:]

    public init() {}

    /// `follower` asked about `users`.
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
}
