import NIOCore
import SIMPCore
import SIMPRedis

/// Rooms in Redis.
///
/// Keys (documented in docs/PROTOCOL.md §7):
/// - `simp:room:{#<room>}:members`: set of the members' user ids; a room exists while it has members.
/// - `simp:room:{#<room>}:seq`: the room's post counter (INCR), one order for every member.
/// - `simp:room:{#<room>}:posted`: hash `<author>/<messageId>` → room seq, so a retransmitted post
///   is numbered and fanned out once; expires `postTTLSeconds` after the latest post.
/// - `simp:room:{#<room>}:got:<author>/<messageId>`: set of the members who receipted that post,
///   whose size is the "delivered k/n" count; expires after `postTTLSeconds`.
public struct RoomStore: Sendable {
    public let redis: any RedisCommands
    /// Seconds the per-post bookkeeping lives (at least the inbox TTL, so late deliveries count).
    public let postTTLSeconds: Int

    public init(redis: any RedisCommands, postTTLSeconds: Int) {
        self.redis = redis
        self.postTTLSeconds = max(60, postTTLSeconds)
    }

    /// The prefix of every key of `room` (its hash tag keeps them in one slot).
    static func prefix(_ room: String) -> String { "simp:room:" + KeyTag.room(room) }
    public static func membersKey(_ room: String) -> String { prefix(room) + ":members" }
    public static func seqKey(_ room: String) -> String { prefix(room) + ":seq" }
    public static func postedKey(_ room: String) -> String { prefix(room) + ":posted" }
    public static func gotKey(_ room: String, author: String, messageId: UInt64) -> String {
        prefix(room) + ":got:\(author)/\(messageId)"
    }

    // KEYS: members, seq, posted. ARGV: author, posted field, TTL.
    // Returns {-1} for a non-member, else {seq, duplicate (0/1), members}.
    private static let postScript = RedisScript(
        """
        if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then return {-1} end
        local seq = redis.call('HGET', KEYS[3], ARGV[2])
        local duplicate = 1
        if not seq then
          seq = redis.call('INCR', KEYS[2])
          redis.call('HSET', KEYS[3], ARGV[2], seq)
          duplicate = 0
        end
        redis.call('EXPIRE', KEYS[3], ARGV[3])
        return {tonumber(seq), duplicate, redis.call('SMEMBERS', KEYS[1])}
        """)
    private static let membersScript = RedisScript(
        """
        if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then return false end
        return redis.call('SMEMBERS', KEYS[1])
        """)
    private static let countScript = RedisScript(
        """
        redis.call('SADD', KEYS[1], ARGV[1])
        redis.call('EXPIRE', KEYS[1], ARGV[2])
        return redis.call('SCARD', KEYS[1])
        """)

    /// Carries out a join (the room is created by its first member), leave or member list.
    public func answer(_ request: RoomRequest, on eventLoop: EventLoop) -> EventLoopFuture<RoomAnswer> {
        let key = Self.membersKey(request.room)
        switch request.operation {
        case .join:
            return join(request, on: eventLoop)
        case .leave:
            return redis.pipeline(
                [["SREM", key, request.user], ["SREM", PresenceStore.roomsKey(request.user), request.room]],
                on: eventLoop
            ).flatMapThrowing { replies in
                guard replies.first?.integer != nil else { throw RedisError("unexpected leave reply \(replies)") }
                return .members([])
            }
        case .members:
            return Self.membersScript.run(.init(keys: [key], arguments: [request.user]), on: redis, eventLoop: eventLoop).flatMapThrowing { reply in
                if case .error(let message) = reply { throw RedisError(message) }
                guard let members = reply.array else { return .notAMember }
                return .members(members.compactMap(\.string))
            }
        }
    }

    /// Why a join of a user in `roomsOfUser` rooms (`isMember` of this one already) to a room
    /// of `members` members is refused (nil: it is not).
    static func joinRefusal(_ request: RoomRequest, roomsOfUser: Int, isMember: Bool, members: Int) -> RoomAnswer? {
        guard !isMember else { return nil }
        if roomsOfUser >= RelayCore.maxRoomsPerUser { return tooManyRooms(roomsOfUser) }
        if members >= RelayCore.maxRoomMembers { return roomFull(request.room, members: members) }
        return nil
    }

    static func tooManyRooms(_ rooms: Int) -> RoomAnswer {
        .limitReached("you are a member of \(rooms) rooms, the relay's limit: leave one first")
    }

    static func roomFull(_ room: String, members: Int) -> RoomAnswer { .limitReached("#\(room) has \(members) members, the relay's limit") }

    // KEYS: the user's rooms (PresenceStore, the user's slot). ARGV: room, rooms a user may be in.
    // Returns 0 (already in it), 1 (added), or minus the user's rooms (refused: at the cap).
    private static let reserveRoomScript = RedisScript(
        """
        if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return 0 end
        local rooms = redis.call('SCARD', KEYS[1])
        if rooms >= tonumber(ARGV[2]) then return -rooms end
        redis.call('SADD', KEYS[1], ARGV[1])
        return 1
        """)
    // KEYS: the room's members (the room's slot). ARGV: user, members a room may have.
    // Returns the members with the user among them, or their count (refused: the room is full).
    private static let joinScript = RedisScript(
        """
        if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then
          local members = redis.call('SCARD', KEYS[1])
          if members >= tonumber(ARGV[2]) then return members end
          redis.call('SADD', KEYS[1], ARGV[1])
        end
        return redis.call('SMEMBERS', KEYS[1])
        """)

    /// A join, each cap checked and taken in one script where its count lives, so relays and
    /// connections joining at once cannot pass either: the user's rooms (in the user's slot)
    /// first, then the room's members (in the room's; on Redis Cluster the two are on different
    /// nodes, so no one script can hold both). A join refused for a full room gives back the
    /// place it took among the user's rooms.
    private func join(_ request: RoomRequest, on eventLoop: EventLoop) -> EventLoopFuture<RoomAnswer> {
        let rooms = PresenceStore.roomsKey(request.user), members = Self.membersKey(request.room)
        let reserve = RedisScript.Call(keys: [rooms], arguments: [request.room, String(RelayCore.maxRoomsPerUser)])
        return Self.reserveRoomScript.run(reserve, on: redis, eventLoop: eventLoop).flatMap { [redis] reserved in
            guard let taken = reserved.integer else { return eventLoop.makeFailedFuture(RedisError("unexpected join reply \(reserved)")) }
            guard taken >= 0 else { return eventLoop.makeSucceededFuture(Self.tooManyRooms(Int(-taken))) }
            let join = RedisScript.Call(keys: [members], arguments: [request.user, String(RelayCore.maxRoomMembers)])
            return Self.joinScript.run(join, on: redis, eventLoop: eventLoop).flatMap { reply in
                if let list = reply.array { return eventLoop.makeSucceededFuture(.members(list.compactMap(\.string))) }
                guard let count = reply.integer else { return eventLoop.makeFailedFuture(RedisError("unexpected join reply \(reply)")) }
                let full = Self.roomFull(request.room, members: Int(count))
                guard taken == 1 else { return eventLoop.makeSucceededFuture(full) }
                return redis.command(["SREM", rooms, request.room], on: eventLoop).map { _ in full }
            }
        }
    }

    /// Numbers `message` (a post by `message.fromUser`) in `room` if the author is a member.
    public func post(_ message: SIMPMessage, to room: String, on eventLoop: EventLoop) -> EventLoopFuture<RoomPostResult> {
        Self.postScript.run(
            .init(
                keys: [Self.membersKey(room), Self.seqKey(room), Self.postedKey(room)],
                arguments: [message.fromUser, "\(message.fromUser)/\(message.messageId)", String(postTTLSeconds)]),
            on: redis, eventLoop: eventLoop
        ).flatMapThrowing { reply in
            guard let items = reply.array, let first = items.first?.integer else { throw RedisError("unexpected post reply \(reply)") }
            guard first >= 0, items.count == 3, let duplicate = items[1].integer, let members = items[2].array else { return .notAMember }
            return .posted(seq: UInt64(first), members: members.compactMap(\.string), duplicate: duplicate == 1)
        }
    }

    /// Records that `member` has room copy `copy`; returns how many members have it.
    public func countDelivery(of copy: SIMPMessage, to member: String, on eventLoop: EventLoop) -> EventLoopFuture<Int> {
        Self.countScript.run(
            .init(
                keys: [Self.gotKey(copy.room, author: copy.author, messageId: copy.authorMessageId)],
                arguments: [member, String(postTTLSeconds)]),
            on: redis, eventLoop: eventLoop
        ).flatMapThrowing { reply in
            guard let count = reply.integer else { throw RedisError("unexpected reply \(reply)") }
            return Int(count)
        }
    }
}

extension RoomStore {
    /// `room`'s members if `user` is one of them, else nil.
    public func members(of room: String, askedBy user: String, on eventLoop: EventLoop) -> EventLoopFuture<[String]?> {
        answer(RoomRequest(operation: .members, room: room, user: user, connection: ConnectionID(0), messageId: 0), on: eventLoop)
            .flatMapThrowing { answer in
                switch answer {
                case .members(let members): return members.sorted()
                case .notAMember, .limitReached: return nil // a member list is never refused for a limit
                }
            }
    }
}
