import NIOCore

/// Group chat: a content datagram whose `toUser` is `#<room>` goes to every other member of the
/// room. The store numbers the room's posts (one order every member sees) and keeps one copy
/// per member in the member's inbox, from where it is delivered like any stored message (at
/// once to members connected here, on reconnect to the others). Each copy comes from `#<room>`
/// with `seq` = `messageId` = the room sequence number, `author` and `authorMessageId` naming
/// the post; the author hears "stored for n members", then "delivered k/n" per member receipt.
extension RelayCore {
    /// The stream id of every room's copies.
    public static let roomStream: UInt64 = 1

    /// Whether `user` is a room address (`#<room>`).
    public static func isRoomAddress(_ user: String) -> Bool {
        // The first byte decides cheaply for almost every address (checked twice per datagram);
        // `hasPrefix` then compares characters as before (`#` and a combining mark is no room).
        user.utf8.first == UInt8(ascii: "#") && user.hasPrefix("#")
    }

    /// Room names: 1-64 characters from letters, digits, `.`, `_` and `-`.
    public static func isValidRoomName(_ room: String) -> Bool {
        (1...64).contains(room.utf8.count)
            && room.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a)
                    || byte == 0x2e || byte == 0x5f || byte == 0x2d
            }
    }

    /// A ROOM_JOIN, ROOM_LEAVE or ROOM_MEMBERS frame from connected `user`.
    func roomControl(_ message: SIMPMessage, from user: String, on connection: ConnectionID, into output: inout [RelayAction]) {
        guard Self.isValidRoomName(message.room) else {
            output += [
                .reject(.missingField, detail: "\(message.kind) with room \"\(message.room)\" from \(user)"),
                .send(connection, .error(.badRequest, "a room name has 1-64 letters, digits, '.', '_' or '-'", messageId: message.messageId)),
            ]
            return
        }
        let operation: RoomRequest.Operation = message.kind == .roomJoin ? .join : message.kind == .roomLeave ? .leave : .members
        output.append(
            .store(.room(RoomRequest(operation: operation, room: message.room, user: user, connection: connection, messageId: message.messageId))))
    }

    /// The store answered a `.room` request.
    func roomAnswered(_ request: RoomRequest, _ result: Result<RoomAnswer, StoreFailure>, into output: inout [RelayAction]) {
        switch result {
        case .success(.members(let members)):
            var reply = SIMPMessage(kind: .roomMembers, messageId: request.messageId, toUser: request.user)
            reply.room = request.room
            reply.members = members.sorted()
            output.append(.send(request.connection, reply))
        case .success(.notAMember):
            output += [
                .reject(.notAMember, detail: "\(request.user) asked for the members of \(request.room)"),
                .send(request.connection, .error(.notAMember, "you are not a member of #\(request.room)", messageId: request.messageId)),
            ]
        case .success(.limitReached(let why)):
            output += [
                .reject(.limitReached, detail: "\(request.user) joining #\(request.room): \(why)"),
                .send(request.connection, .error(.limitReached, why, messageId: request.messageId)),
            ]
        case .failure:
            output.append(.send(request.connection, .error(.internal, "room registry unavailable, try again", messageId: request.messageId)))
        }
    }

    /// A content datagram for `#<room>` from session `sender` (told if the room name is invalid).
    func postToRoom(_ bytes: ByteBuffer, _ header: DatagramHeader, from sender: UInt64, into output: inout [RelayAction]) {
        let room = String(header.toUser.dropFirst())
        guard Self.isValidRoomName(room) else {
            output.append(.reject(.unknownRecipient, detail: "\(header.fromUser) -> invalid room \(header.toUser)"))
            let error = SIMPMessage.error(.unknownRecipient, "\"\(header.toUser)\" is not a valid room", messageId: header.messageId)
            return tell(session: sender, error, into: &output)
        }
        guard let message = try? MessageCodec.decode(bytes) else {
            return output.append(.reject(.malformed, detail: "datagram for \(header.toUser) does not decode"))
        }
        output.append(.store(.postToRoom(room: room, message: message)))
    }

    /// The store answered a `.postToRoom`: copies go to every other member's inbox; the author
    /// learns the post is stored for them (or that it is not a member).
    func roomPosted(room: String, message: SIMPMessage, _ result: Result<RoomPostResult, StoreFailure>, into output: inout [RelayAction]) {
        let header = DatagramHeader(message)
        switch result {
        case .success(.notAMember):
            output.append(.reject(.notAMember, detail: "\(message.fromUser) posted to #\(room)"))
            tellSender(header, .notAMember, "you are not a member of #\(room)", into: &output)
        case .success(.posted(let seq, let members, let duplicate)):
            let recipients = members.filter { $0 != message.fromUser }.sorted()
            for author in sessions.connections(of: message.fromUser) {
                var receipt = message.receipt(holdMicros: 0)
                receipt.attempt = 0
                receipt.status = .stored
                receipt.fromUser = message.toUser
                receipt.room = room
                receipt.memberCount = UInt32(recipients.count)
                receipt.seq = seq // the author's own place in the room's order, which it never receives
                output.append(.send(author, receipt))
            }
            guard !duplicate else { return }
            for member in recipients {
                output.append(
                    .store(
                        .storeInInbox(
                            user: member, message: Self.roomCopy(of: message, room: room, seq: seq, for: member, memberCount: recipients.count))))
            }
        case .failure:
            output.append(.reject(.inboxUnavailable, detail: "\(message.fromUser) -> #\(room)"))
        }
    }

    /// Member `member`'s copy of post `message`, number `seq` in `room`.
    private static func roomCopy(of message: SIMPMessage, room: String, seq: UInt64, for member: String, memberCount: Int) -> SIMPMessage {
        var copy = message
        copy.fromUser = "#\(room)"
        copy.toUser = member
        copy.room = room
        copy.author = message.fromUser
        copy.authorMessageId = message.messageId
        copy.memberCount = UInt32(memberCount)
        copy.messageId = seq
        copy.stream = roomStream
        copy.seq = seq
        copy.floor = 0 // the relay's sender computes it per member
        copy.custodyFloor = 0 // the author's, about its own conversation with the room
        copy.attempt = 0
        return copy
    }

    /// The store counted a member's receipt for a room post: the author hears how many members
    /// have it, on whichever relay it is connected to (progress is not stored for an offline author).
    mutating func roomDeliveryCounted(
        copy: SIMPMessage, delivered: Int, now: NIODeadline, into output: inout [RelayAction]
    ) {
        var receipt = SIMPMessage(kind: .receipt, messageId: copy.authorMessageId, fromUser: copy.fromUser, toUser: copy.author)
        receipt.status = .roomDelivered
        receipt.room = copy.room
        receipt.memberCount = copy.memberCount
        receipt.deliveredCount = UInt32(delivered)
        receipt.members = [copy.toUser] // whose receipt this count adds (so its client can count readers only)
        routeControl(receipt, to: copy.author, now: now, into: &output)
    }
}
