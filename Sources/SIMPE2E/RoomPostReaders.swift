/// Who can read each of this device's recent room posts, for its delivery mark (docs/E2E.md
/// §14.2): the relay counts every member's receipt (`✓✓ 2/2` would count a member who joined
/// by name, or one without usable keys, who has the post but cannot decrypt it); this counts
/// only the members the post's sender key was given to. Sans-I/O.
public struct RoomPostReaders: Sendable {
    /// Posts remembered at most; the oldest is forgotten first (its mark then shows the relay's count).
    public static let maxPosts = 1_024
    /// Posts sealed and not submitted yet, at most; beyond it they are all forgotten (a post
    /// sealed and never submitted: its sending failed).
    public static let maxUnsubmitted = 256

    private var readers: [UInt64: Set<String>] = [:]
    private var have: [UInt64: Set<String>] = [:]
    private var order: [UInt64] = []
    /// The readers of each post sealed and not submitted yet, by its sealed bytes.
    private var unsubmitted: [[UInt8]: Set<String>] = [:]

    public init() {}

    /// The post whose sealed bytes are `post` was sealed for `members`; it gets its id when
    /// submitted (`submitted`).
    public mutating func sealing(_ post: [UInt8], readers members: Set<String>) {
        if unsubmitted.count >= Self.maxUnsubmitted { unsubmitted = [:] }
        unsubmitted[post] = members
    }

    /// The post whose sealed bytes are `post` was submitted as `messageId`: its readers are
    /// those it was sealed for (`sealing`); nothing for a post not sealed here.
    public mutating func submitted(_ post: [UInt8], as messageId: UInt64) {
        guard let members = unsubmitted.removeValue(forKey: post) else { return }
        sealed(messageId, readers: members)
    }

    /// Post `messageId` was sealed for `members` (the users that got its sender key).
    public mutating func sealed(_ messageId: UInt64, readers members: Set<String>) {
        if readers.updateValue(members, forKey: messageId) == nil { order.append(messageId) }
        have[messageId] = []
        while order.count > Self.maxPosts {
            let oldest = order.removeFirst()
            readers[oldest] = nil
            have[oldest] = nil
        }
    }

    /// The relay counted `member`'s receipt for post `messageId`: how many of its readers have
    /// it, of how many; nil for a post not known here (the relay's numbers stand) or a receipt
    /// that names no member (a relay that does not say whose receipt it counted).
    public mutating func counted(_ messageId: UInt64, member: String?) -> (delivered: Int, of: Int)? {
        guard let members = readers[messageId], let member else { return nil }
        if members.contains(member) { have[messageId, default: []].insert(member) }
        return (have[messageId]?.count ?? 0, members.count)
    }
}
