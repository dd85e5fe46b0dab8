import SIMPCore

/// Who is in a room: the members the relay listed last (on `/join`, `/members`, and asked again
/// quietly when they may have changed), with a line when someone joined or left.
extension ChatSession {
    /// The relay listed `room`'s `members`: says who joined and who left since the last list
    /// (nothing the first time), and marks this user's stored posts there if no one else is in it.
    mutating func membersLearned(_ room: String, _ members: [String]) {
        for member in members { learnNames(member) }
        let now = Set(members)
        if let before = roomMembers[room] {
            for joined in now.subtracting(before).subtracting([user]).sorted() { notice("\(joined) joined #\(room)", .dim) }
            for left in before.subtracting(now).subtracting([user]).sorted() { notice("\(left) left #\(room)", .dim) }
        }
        roomMembers[room] = now
        guard isAlone(in: room) else { return }
        for ref in outgoing.messages.indices where outgoing[ref].message.toUser == "#" + room && outgoing[ref].status == .stored {
            _ = update(ref: ref, .noOtherMembers, quietly: true)
        }
    }

    /// A post arrived in a room: an author not in the last list joined (said before the post),
    /// and a post addressed to another number of members than the list has asks for the list.
    mutating func roomPostArriving(_ message: SIMPMessage) -> [ChatEffect] {
        guard RelayCore.isRoomAddress(message.fromUser), !message.author.isEmpty else { return [] }
        let room = String(message.fromUser.dropFirst())
        guard var known = roomMembers[room] else { return [] }
        if known.insert(message.author).inserted {
            notice("\(message.author) joined #\(room)", .dim)
            roomMembers[room] = known
        }
        return message.memberCount != 0 && Int(message.memberCount) != known.count ? [.room(.watch(room))] : []
    }

    /// The status a post of this user's to `room` gets when the relay stored it: no one else is
    /// there, as far as the last list says, or stored for the members; and the list is asked
    /// again (someone may have come or gone).
    mutating func roomPostStored(_ status: DeliveryStatus, to address: String) -> (DeliveryStatus, [ChatEffect]) {
        guard status == .stored, RelayCore.isRoomAddress(address) else { return (status, []) }
        let room = String(address.dropFirst())
        return (isAlone(in: room) ? .noOtherMembers : status, [.room(.watch(room))])
    }

    /// Whether the last list of `room` has no one but this user.
    func isAlone(in room: String) -> Bool {
        roomMembers[room].map { $0.subtracting([user]).isEmpty } ?? false
    }
}
