import SIMPCore

/// A file sent to a room counts its members as a post does (`✓ 1/3`, `✓✓ 3/3`), and a member
/// for whom the relay holds the file (offline, or with several devices; docs/PROTOCOL.md §5.6,
/// §5.7) counts once the relay says a device of that member has it (`fileReceived`), not when
/// the relay took it: the mark grows as the members' devices fetch the file.
extension ChatSession {
    /// Room file `ref` was sent: `delivered` members' devices have it whole; the relay holds it
    /// for the members of `heldFor` (under the file id given) until their devices fetch it. News
    /// that came before (a device fetched it while the others were still sent to) is counted now.
    public mutating func roomFileHeld(ref: Int, heldFor: [String: UInt64], delivered: Int, of members: Int) -> [ChatEffect] {
        var delivered = delivered
        for (member, fileId) in heldFor {
            if roomFileNewsEarly[fileId]?.remove(member) != nil {
                delivered += 1
                continue
            }
            roomFilesWaiting[fileId, default: RoomFileWaiting(ref: ref)].members.insert(member)
        }
        return resolved(ref: ref, .roomDelivered(delivered, of: members))
    }

    /// The relay says `member` has room file `fileId`: its post counts one more member, once
    /// (a second device changes nothing). Nil when no room file waits for that id.
    mutating func roomFileReceived(fileId: UInt64, by member: String) -> [ChatEffect]? {
        guard var waiting = roomFilesWaiting[fileId] else { return nil }
        guard waiting.members.remove(member) != nil else { return [] }
        roomFilesWaiting[fileId] = waiting.members.isEmpty ? nil : waiting
        guard case .roomDelivered(let delivered, let members) = outgoing[waiting.ref].status else { return [] }
        return update(ref: waiting.ref, .roomDelivered(delivered + 1, of: members), quietly: delivered + 1 < members).effects
    }

    /// News that `member` has file `fileId` that no line waits for yet: kept for a room file
    /// whose send has not ended (`roomFileHeld`).
    mutating func keepRoomFileNews(fileId: UInt64, by member: String) {
        if roomFileNewsEarly.count >= 256 { roomFileNewsEarly = [:] } // never claimed: not a file of this chat's
        roomFileNewsEarly[fileId, default: []].insert(member)
    }
}

/// A room file's line and the members the relay holds it for whose devices have not said they have it.
struct RoomFileWaiting: Equatable {
    var ref: Int
    var members: Set<String> = []
}
