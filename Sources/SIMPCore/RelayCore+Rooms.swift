import NIOCore

/// A room request from a client's control channel, for the shell to carry out in Redis.
public struct RoomRequest: Sendable, Equatable {
    public enum Operation: Sendable, Equatable { case join, leave, members }
    public var operation: Operation
    public var room: String
    public var user: String
    public var connection: ConnectionID
    /// The request's messageId, echoed in the answer.
    public var messageId: UInt64

    public init(operation: Operation, room: String, user: String, connection: ConnectionID, messageId: UInt64) {
        self.operation = operation
        self.room = room
        self.user = user
        self.connection = connection
        self.messageId = messageId
    }
}

/// What Redis said to a `RoomRequest`.
public enum RoomAnswer: Sendable, Equatable {
    /// The room's members (empty after a leave).
    case members([String])
    case notAMember
    case failed
}

/// What Redis said to a `.postToRoom`.
public enum RoomPostResult: Sendable, Equatable {
    /// The post has room sequence number `seq`; `duplicate` when it had been posted before
    /// (a retransmission). `members` are the room's members now.
    case posted(seq: UInt64, members: [String], duplicate: Bool)
    case notAMember
    case failed
}

/// Group chat: a content datagram whose `toUser` is `#<room>` goes to every other member of the
/// room. The relay numbers the room's posts (one order every member sees) and stores one copy
/// per member in the member's inbox, from where it is delivered like any stored message (at
/// once to members connected here, on reconnect to the others). Each copy comes from `#<room>`
/// with `seq` = `messageId` = the room sequence number, `author` and `authorMessageId` naming
/// the post; the author hears "stored for n members", then "delivered k/n" per member receipt.
extension RelayCore {
    /// The stream id of every room's copies.
    public static let roomStream: UInt64 = 1

    /// Whether `user` is a room address (`#<room>`).
    public static func isRoomAddress(_ user: String) -> Bool { user.hasPrefix("#") }

    /// Room names: 1-64 characters from letters, digits, `.`, `_` and `-`.
    public static func isValidRoomName(_ room: String) -> Bool {
        (1...64).contains(room.utf8.count) && room.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a)
                || byte == 0x2e || byte == 0x5f || byte == 0x2d
        }
    }

    /// A ROOM_JOIN, ROOM_LEAVE or ROOM_MEMBERS frame from connected `user`.
    func roomControl(_ message: SIMPMessage, from user: String, on connection: ConnectionID) -> [Action] {
        guard Self.isValidRoomName(message.room) else {
            return [.reject(.missingField, detail: "\(message.kind) with room \"\(message.room)\" from \(user)"),
                    .send(connection, .error(.badRequest, "a room name has 1-64 letters, digits, '.', '_' or '-'", messageId: message.messageId))]
        }
        let operation: RoomRequest.Operation = message.kind == .roomJoin ? .join : message.kind == .roomLeave ? .leave : .members
        return [.roomRequest(RoomRequest(operation: operation, room: message.room, user: user, connection: connection, messageId: message.messageId))]
    }

    /// Redis answered a `.roomRequest`.
    public func roomAnswered(_ request: RoomRequest, _ answer: RoomAnswer) -> [Action] {
        switch answer {
        case .members(let members):
            var reply = SIMPMessage(kind: .roomMembers, messageId: request.messageId, toUser: request.user)
            reply.room = request.room
            reply.members = members.sorted()
            return [.send(request.connection, reply)]
        case .notAMember:
            return [.reject(.notAMember, detail: "\(request.user) asked for the members of \(request.room)"),
                    .send(request.connection, .error(.notAMember, "you are not a member of #\(request.room)", messageId: request.messageId))]
        case .failed:
            return [.send(request.connection, .error(.internal, "room registry unavailable, try again", messageId: request.messageId))]
        }
    }

    /// A content datagram for `#<room>`.
    func postToRoom(_ bytes: ByteBuffer, _ header: DatagramHeader) -> [Action] {
        let room = String(header.toUser.dropFirst())
        guard Self.isValidRoomName(room) else {
            return [.reject(.unknownRecipient, detail: "\(header.fromUser) -> invalid room \(header.toUser)")]
                + tellSender(header, .unknownRecipient, "\"\(header.toUser)\" is not a valid room")
        }
        guard let message = try? MessageCodec.decode(bytes) else {
            return [.reject(.malformed, detail: "datagram for \(header.toUser) does not decode")]
        }
        return [.postToRoom(room: room, message: message)]
    }

    /// Redis answered a `.postToRoom`: copies go to every other member's inbox; the author
    /// learns the post is stored for them (or that it is not a member).
    public func roomPosted(room: String, message: SIMPMessage, result: RoomPostResult) -> [Action] {
        let header = DatagramHeader(message)
        switch result {
        case .failed:
            return [.reject(.inboxUnavailable, detail: "\(message.fromUser) -> #\(room)")]
        case .notAMember:
            return [.reject(.notAMember, detail: "\(message.fromUser) posted to #\(room)")]
                + tellSender(header, .notAMember, "you are not a member of #\(room)")
        case .posted(let seq, let members, let duplicate):
            let recipients = members.filter { $0 != message.fromUser }.sorted()
            var actions: [Action] = []
            if let author = sessions[message.fromUser] {
                var receipt = message.receipt(holdMicros: 0)
                receipt.attempt = 0
                receipt.status = .stored
                receipt.fromUser = message.toUser
                receipt.room = room
                receipt.memberCount = UInt32(recipients.count)
                receipt.seq = seq // the author's own place in the room's order, which it never receives
                actions.append(.send(author.connection, receipt))
            }
            guard !duplicate else { return actions }
            for member in recipients {
                var copy = message
                copy.fromUser = "#\(room)"
                copy.toUser = member
                copy.room = room
                copy.author = message.fromUser
                copy.authorMessageId = message.messageId
                copy.memberCount = UInt32(recipients.count)
                copy.messageId = seq
                copy.stream = Self.roomStream
                copy.seq = seq
                copy.floor = 0 // the relay's sender computes it per member
                copy.attempt = 0
                actions.append(.storeInInbox(user: member, message: copy))
            }
            return actions
        }
    }

    /// Redis counted a member's receipt for a room post: `delivered` of its members have it.
    /// The author hears it on whichever relay it is connected to (progress is not stored for
    /// an offline author).
    public mutating func roomDeliveryCounted(copy: SIMPMessage, delivered: Int, now: NIODeadline = .now()) -> [Action] {
        var receipt = SIMPMessage(kind: .receipt, messageId: copy.authorMessageId, fromUser: copy.fromUser, toUser: copy.author)
        receipt.status = .roomDelivered
        receipt.room = copy.room
        receipt.memberCount = copy.memberCount
        receipt.deliveredCount = UInt32(delivered)
        guard let author = sessions[copy.author] else { return routeRemote(.control(receipt), to: copy.author, now: now) }
        return [.send(author.connection, receipt)]
    }
}
