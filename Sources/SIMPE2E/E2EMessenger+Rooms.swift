/// A room post sealed once for every member device (docs/E2E.md §8, §14), and the sender key
/// distributions that must go out, pairwise, before it.
public struct SealedRoomPost: Sendable {
    /// The room post (§8.2): `e2ePayload` of the post, the same bytes for every member.
    public let post: [UInt8]
    /// One envelope (docs/E2E.md §13) per member user whose devices get this device's new sender key;
    /// empty when the members did not change since the last post.
    public let distributions: [(user: String, envelope: [UInt8])]
}

/// Rooms on top of the pairwise sessions (docs/E2E.md §14): this device's sender key per room
/// is re-made whenever the member devices it knows change, and handed to them inside pairwise
/// envelopes; posts are decrypted with the key their author's device handed out.
extension E2EMessenger {
    /// Seals `plaintext` for `room`, whose other members are `members` (users; their devices
    /// are the ones this device knows and may encrypt to, `recipients(of:)`). A changed set of member devices first
    /// makes a new sender key, so a device that left cannot read this post.
    public mutating func sealRoomPost(
        _ plaintext: [UInt8], room: String, members: [String], using random: inout some RandomNumberGenerator
    ) throws -> SealedRoomPost {
        var memberDevices: Set<String> = []
        for member in members {
            for device in try recipients(of: member) { memberDevices.insert(Self.sessionName(member, device.device)) }
        }
        var keys: RoomSenderKeys
        var distribution: SenderKeyDistribution?
        if var existing = try roomKeys(room) {
            distribution = existing.updateMembers(memberDevices, using: &random)
            keys = existing
        } else {
            keys = RoomSenderKeys(roomID: room, members: memberDevices, using: &random)
            distribution = keys.outbound.distribution
        }
        var distributions: [(user: String, envelope: [UInt8])] = []
        if let distribution {
            for member in members where try !recipients(of: member).isEmpty {
                distributions.append((member, try seal(distribution.encoded.bytes, to: member)))
            }
        }
        let post = keys.encrypt(plaintext)
        try saveRoomKeys(keys)
        return SealedRoomPost(post: post, distributions: distributions)
    }

    /// Makes the next post to `room` use a new sender key, sent to every member device again
    /// (a distribution of the current one failed, so some member may never get it).
    public mutating func renewSenderKeyAtNextPost(in room: String) throws {
        guard var keys = try roomKeys(room) else { return }
        keys.members = []
        try saveRoomKeys(keys)
    }

    /// Whether a decrypted pairwise plaintext is a sender key distribution (docs/E2E.md §14.1) rather than
    /// a message: it starts `0x01 0x04`, which no protobuf `Message` does (field number 0).
    public static func isSenderKeyDistribution(_ plaintext: [UInt8]) -> Bool {
        plaintext.count >= 2 && plaintext[0] == 1 && plaintext[1] == E2EMessageType.senderKeyDistribution.rawValue
    }

    /// Keeps the sender key that `peer`'s device `device` sent (the plaintext of a pairwise
    /// message from it); returns its room.
    @discardableResult
    public mutating func acceptSenderKey(
        _ plaintext: [UInt8], from peer: String, device: String, using random: inout some RandomNumberGenerator
    ) throws -> String {
        let distribution = try SenderKeyDistribution(encoded: plaintext)
        var keys = try roomKeys(distribution.roomID) ?? RoomSenderKeys(roomID: distribution.roomID, members: [], using: &random)
        try keys.accept(distribution, from: Self.sessionName(peer, device))
        try saveRoomKeys(keys)
        return distribution.roomID
    }

    /// Decrypts a post `author` wrote in `room`, with the sender key of whichever of its
    /// devices the post's key id names.
    /// - Throws: `E2EError.noSession` when no such key arrived (yet), `.duplicate` for a post
    ///   decrypted before, `.authenticationFailed` for a forged or altered one.
    public mutating func openRoomPost(_ post: [UInt8], room: String, author: String, now: UInt64) throws -> [UInt8] {
        guard var keys = try roomKeys(room) else { throw E2EError.noSession("no sender key for room \(room) yet") }
        let plaintext = try keys.decrypt(post, fromAnyDeviceOf: author, now: now)
        try saveRoomKeys(keys)
        return plaintext
    }

    private func roomKeys(_ room: String) throws -> RoomSenderKeys? {
        try store.load("room/" + room).map { try RoomSenderKeys(secretBytes: $0) }
    }

    private func saveRoomKeys(_ keys: RoomSenderKeys) throws {
        try store.save("room/" + keys.roomID, keys.secretBytes)
    }
}

extension RoomSenderKeys {
    /// Decrypts a post from one of `user`'s devices (the one whose sender key has the post's key id).
    mutating func decrypt(_ payload: [UInt8], fromAnyDeviceOf user: String, now: UInt64, limits: E2ELimits = .standard) throws -> [UInt8] {
        let message = try RoomMessage(encoded: payload)
        let prefix = E2EMessenger.sessionName(user, "")
        guard let sender = inbound.first(where: { $0.key.hasPrefix(prefix) && $0.value.contains { $0.keyID == message.keyID } })?.key else {
            throw E2EError.noSession("room \(roomID): no sender key \(message.keyID) from \(user)")
        }
        return try decrypt(payload, from: sender, now: now, limits: limits)
    }
}
