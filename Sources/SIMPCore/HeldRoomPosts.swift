/// Room posts that wait for their author's sender key (docs/E2E.md §14.3), sans-I/O: how many
/// may wait, for how long, which are given up and why, which are released when a key arrives,
/// and whose authors are asked for them again. The shell (`SIMPClient`'s `EndToEnd+Rooms`)
/// decrypts, keeps the posts in the device's store and tells the user; time is the wall clock
/// in milliseconds since the epoch, passed in, because held posts outlive the process.
public struct HeldRoomPosts: Sendable, Equatable {
    /// Most posts waiting at once; beyond it the oldest is given up.
    public static let maxHeld = 256
    /// How long a post waits for its author's sender key before it is given up (checked when
    /// the next end-to-end room post arrives, and when an earlier process's posts are resumed).
    public static let maxWaitMilliseconds: UInt64 = 60_000

    /// A post as received, and when it arrived (milliseconds since the epoch).
    public struct Post: Sendable, Equatable {
        public var message: SIMPMessage
        public var since: UInt64

        public init(message: SIMPMessage, since: UInt64) {
            self.message = message
            self.since = since
        }
    }

    /// Why a post stopped waiting unread.
    public enum GiveUpReason: Sendable, Equatable, CustomStringConvertible {
        /// `maxHeld` posts were waiting: the oldest went.
        case tooManyWaiting
        /// It waited longer than `maxWaitMilliseconds`.
        case keyDidNotArrive

        public var description: String {
            switch self {
            case .tooManyWaiting: "too many posts wait for sender keys"
            case .keyDidNotArrive: "its author's sender key did not arrive"
            }
        }
    }

    /// A post given up: the user is told it cannot be read, and its author is asked for it
    /// (`takeRequestsToAuthors`).
    public struct GivenUp: Sendable, Equatable {
        public var message: SIMPMessage
        public var reason: GiveUpReason

        public init(message: SIMPMessage, reason: GiveUpReason) {
            self.message = message
            self.reason = reason
        }
    }

    /// The posts waiting, oldest first.
    public private(set) var posts: [Post]
    /// Posts given up whose authors are not asked yet (at most `maxHeld`; beyond it they are
    /// told to the user only).
    public private(set) var unread: [SIMPMessage] = []

    /// `posts` waiting (an earlier process's, as kept in the device's store).
    public init(posts: [Post] = []) {
        self.posts = posts
    }

    /// Holds `message`, which arrived at `since` and cannot be decrypted before its author's
    /// sender key arrives; returns the oldest post when `maxHeld` were waiting already (given up).
    public mutating func hold(_ message: SIMPMessage, since: UInt64) -> GivenUp? {
        posts.append(Post(message: message, since: since))
        guard posts.count > Self.maxHeld else { return nil }
        return giveUp(posts.removeFirst().message, .tooManyWaiting)
    }

    /// Holds `post` again as it was (taken out to be handed over, and the application does not
    /// take it now): not counted against `maxHeld`, it never waited less.
    public mutating func keep(_ post: Post) {
        posts.append(post)
    }

    /// Gives up the posts that have waited longer than `maxWaitMilliseconds` at `now`, in the
    /// order they arrived. A post that arrived "after" `now` (the wall clock went back) waits on.
    public mutating func expire(now: UInt64) -> [GivenUp] {
        let isExpired = { (post: Post) in now >= post.since && now - post.since > Self.maxWaitMilliseconds }
        let expired = posts.filter(isExpired)
        guard !expired.isEmpty else { return [] }
        posts.removeAll(where: isExpired)
        return expired.map { giveUp($0.message, .keyDidNotArrive) }
    }

    /// The posts by `author` to `room` (its name, without "#"): its sender key arrived. They stop
    /// waiting and are returned in the room's order (`seq`), to be decrypted and handed over.
    public mutating func release(room: String, author: String) -> [Post] {
        let isWaiting = { (post: Post) in post.message.fromUser == "#" + room && post.message.author == author }
        let released = posts.filter(isWaiting).sorted { $0.message.seq < $1.message.seq }
        posts.removeAll(where: isWaiting)
        return released
    }

    /// Every post waiting, which stops waiting (an earlier process's, each to be handed over
    /// or held again).
    public mutating func releaseAll() -> [Post] {
        defer { posts = [] }
        return posts
    }

    /// What to ask each author whose posts were given up: the post as the author knows it
    /// (`messageId` is the author's own id, `fromUser` the author), for a resend request to
    /// each of the author's devices (docs/E2E.md §7.5). A post without its author's id or
    /// name cannot be asked for. Each is returned once.
    public mutating func takeRequestsToAuthors() -> [SIMPMessage] {
        defer { unread = [] }
        return unread.compactMap { post in
            guard post.authorMessageId != 0, !post.author.isEmpty else { return nil }
            var asked = post
            (asked.messageId, asked.fromUser) = (post.authorMessageId, post.author)
            return asked
        }
    }

    private mutating func giveUp(_ message: SIMPMessage, _ reason: GiveUpReason) -> GivenUp {
        if unread.count < Self.maxHeld { unread.append(message) }
        return GivenUp(message: message, reason: reason)
    }
}
