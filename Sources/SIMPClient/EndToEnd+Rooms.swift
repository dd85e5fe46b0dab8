import NIOCore
import SIMPCore
import SIMPE2E

/// Room posts that wait for their author's sender key, and the members each room had.
struct RoomPosts {
    /// The posts waiting for their author's sender key, and those given up (`HeldRoomPosts`
    /// decides; the shell decrypts, stores and tells).
    var waiting = HeldRoomPosts()
    /// The posts waiting, oldest first.
    var held: [HeldRoomPosts.Post] { waiting.posts }
    /// Each room's members as the relay last listed them (used while it cannot be asked).
    var members: [String: [String]] = [:]
    /// Who each room's members admitted, as far as this device knows (EndToEnd+Admission).
    var admission: [String: RoomAdmission] = [:]
    /// The member count of the last copy of a post seen in each room (a change asks for the list).
    var memberCounts: [String: UInt32] = [:]
    /// Who can read each post sealed or submitted lately, for its delivery mark.
    var postReaders = RoomPostReaders()
    /// Hands the application a post decrypted after its sender key arrived.
    var deliverLate: (SIMPMessage) -> Void = { _ in }
    /// Whether the application takes a post now (false: `simp listen --count` has its
    /// messages); a post not handed over stays held, undecrypted, for the next process.
    var mayDeliverLate: () -> Bool = { true }
}

/// Room posts end to end (docs/PROTOCOL.md §4.8, docs/E2E.md §14): a post is encrypted once
/// with this device's sender key for the room; the key goes to the member devices inside
/// direct messages, and is made again whenever the member devices change.
extension EndToEnd {
    /// `message` (to `#<room>`) sealed with this device's sender key, after asking the relay
    /// for the room's members and fetching their devices when the lists are old; a new
    /// sender key is sent (as direct messages, before the post) when the member devices changed.
    func sealPost(_ message: SIMPMessage, via engine: ClientEngine) -> EventLoopFuture<SIMPMessage> {
        let room = String(message.toUser.dropFirst())
        return engine.roomRequest(.roomMembers, room: room).map { [self] members in
            rooms.members[room] = members
            return members
        }.flatMapError { [self] error in
            switch error {
            case SIMPClientError.connectionLost where rooms.members[room] != nil:
                return engine.eventLoop.makeSucceededFuture(rooms.members[room]!) // as a moment before; the post waits in the outbox
            case SIMPClientError.rejected(.notAMember, _):
                return engine.eventLoop.makeSucceededFuture([]) // sealed for nobody: the relay refuses the post itself
            default:
                return engine.eventLoop.makeFailedFuture(error)
            }
        }.flatMap { [self] members in
            // Only the members admitted by a member get the sender key (EndToEnd+Admission).
            let others = usedRoom(room, members: members).readers(among: members)
            return prepareSessions(with: others, via: engine).flatMapThrowing { [self] in
                try sealPost(message, room: room, members: others, via: engine)
            }.flatMap { [self] sealed, distributions in
                // The post goes once each new key is delivered to, or stored by the relay for,
                // its member (or failed, or waits in the outbox): a process that ends right
                // after the post (simp send) does not leave the key behind. A receiver still
                // holds a post whose key comes later (an inbox read in another order).
                EventLoopFuture.whenAllComplete(distributions, on: engine.eventLoop).map { [self] outcomes in
                    if outcomes.contains(where: { if case .success(.failed) = $0 { true } else { false } }) {
                        // That member may never get this key: the next post makes a new one for all.
                        try? messenger.renewSenderKeyAtNextPost(in: room)
                    }
                    return sealed
                }
            }
        }
    }

    /// `peer` has a device with a new key (its keys were reset, or it was reinstalled under the
    /// same device name): the next post to each room it shares with this device makes a new
    /// sender key and sends it to every member, so that device reads the posts from then on
    /// (the member devices, by name, did not change: without this it would get no key).
    func renewRoomKeys(with peer: String) throws {
        for (room, members) in rooms.members where members.contains(peer) { try messenger.renewSenderKeyAtNextPost(in: room) }
    }

    private func sealPost(
        _ message: SIMPMessage, room: String, members: [String], via engine: ClientEngine
    ) throws -> (SIMPMessage, [EventLoopFuture<SendResult>]) {
        for member in members { try refuseUnlessVerificationHolds(member, what: "not posted to #\(room)") }
        let keyless = try members.filter { try messenger.recipients(of: $0).isEmpty }
        if policy.postsUnencrypted(keylessMembers: keyless.count) { return (message, []) } // the user's own choice (--no-e2e)
        // A member without usable keys cannot read the post; the others are not held up by it.
        for member in keyless where toldOnce.shouldTell(.noUsableKeys(user: member, room: room)) { onNotice(.noUsableKeys(user: member, room: room)) }
        let readers = members.filter { !keyless.contains($0) }
        let sealed = try messenger.sealRoomPost(message.endToEndPlaintext, room: room, members: readers, using: &random)
        rooms.postReaders.sealing(sealed.post, readers: Set(readers))
        // Before the post, on the same reliable path (retransmitted, kept in the outbox,
        // stored for offline members).
        let distributions = sealed.distributions.map { member, envelope in
            let (id, outcome) = engine.send(SIMPMessage(kind: .text, toUser: member).sealedEndToEnd(envelope))
            sentLog.record(id, nil, now: engine.now) // not sent again if asked (EndToEnd+Resend)
            return outcome
        }
        return (message.sealedEndToEnd(sealed.post), distributions)
    }

    /// Post `sealed` was submitted as `id`: its delivery mark counts the members it was sealed for.
    func postSent(_ sealed: SIMPMessage, id: UInt64) {
        rooms.postReaders.submitted(sealed.e2ePayload, as: id)
    }

    /// `receipt` with its ROOM_DELIVERED count (`deliveredCount` of `memberCount`) made the
    /// count of the members who can read the post (those it was sealed for), when the relay
    /// says whose receipt it counted (`members`) and the post was sealed here.
    func readersCounted(_ receipt: SIMPMessage) -> SIMPMessage {
        guard receipt.kind == .receipt, receipt.status == .roomDelivered,
            let count = rooms.postReaders.counted(receipt.messageId, member: receipt.members.first)
        else { return receipt }
        var counted = receipt
        (counted.deliveredCount, counted.memberCount) = (UInt32(count.delivered), UInt32(count.of))
        return counted
    }

    /// A room copy decrypted; nil for a post decrypted before, one held until its author's
    /// sender key arrives (it is then handed over by `rooms.deliverLate`), or one that cannot
    /// be decrypted (the user is told). A held post is kept in the device's store with the
    /// time it arrived (`arrivedAt`, now unless it was held before) until it is handed over or
    /// given up.
    func openPost(_ message: SIMPMessage, arrivedAt: UInt64? = nil) -> SIMPMessage? {
        let now = UInt64(wallClockMillis())
        giveUpWaitingPosts(now: now)
        do {
            // A copy delivered again after a restart (its receipt never left) is handed over
            // as it was opened, kept with the chain step that opened it (docs/E2E.md §15).
            if let kept = try messenger.keptPlaintext(of: message.messageId, from: message.fromUser, device: message.author) {
                return try message.openedEndToEnd(kept)
            }
            let plaintext = try messenger.openRoomPost(
                message.e2ePayload, room: String(message.fromUser.dropFirst()), author: message.author, now: now)
            try messenger.noteDecrypted(message.messageId, from: message.fromUser, device: message.author, plaintext: plaintext)
            return try message.openedEndToEnd(plaintext)
        } catch E2EError.duplicate {
            return nil
        } catch E2EError.noSession {
            if let givenUp = rooms.waiting.hold(message, since: arrivedAt ?? now) { tellGivenUp(givenUp) }
            saveHeldPosts()
            return nil
        } catch {
            logger.warning(
                "cannot decrypt a room post", metadata: ["room": "\(message.fromUser)", "author": "\(message.author)", "error": "\(error)"])
            onNotice(.undecryptable(user: message.author, messageId: message.messageId, reason: "\(error)"))
            return nil // the notice says it; never an empty line
        }
    }

    /// A direct message carrying a sender key: kept, and the posts waiting for it are
    /// decrypted and handed over. The message itself is not shown (nil).
    func takeSenderKey(_ plaintext: [UInt8], _ message: SIMPMessage) -> SIMPMessage? {
        do {
            let device = try E2EEnvelope(encoded: message.e2ePayload).senderDevice
            let room = try messenger.acceptSenderKey(plaintext, from: message.fromUser, device: device, using: &random)
            let waiting = rooms.waiting.release(room: room, author: message.fromUser)
            // Out of the store once handed over: a process that ends before finds them there
            // again, with their key (`resumeHeldPosts`).
            for post in waiting { handOverHeld(post) }
            if !waiting.isEmpty { saveHeldPosts() }
        } catch {
            logger.warning("ignoring a sender key", metadata: ["from": "\(message.fromUser)", "error": "\(error)"])
        }
        return nil
    }

    private func giveUpWaitingPosts(now: UInt64) {
        let expired = rooms.waiting.expire(now: now)
        guard !expired.isEmpty else { return }
        for post in expired { tellGivenUp(post) }
        saveHeldPosts()
    }

    /// The posts an earlier process of this device held when it ended: each is handed over
    /// when its key is here by now, else waits again (its 60 s counted from when it arrived),
    /// and the user is told of those that waited longer. Call once `onNotice` and
    /// `rooms.deliverLate` are set.
    func resumeHeldPosts() {
        let saved: [HeldRoomPosts.Post]
        do {
            saved = try store.load(RoomPosts.storeName).map(RoomPosts.decoded) ?? []
        } catch {
            return logger.error("cannot read the room posts held by an earlier run; they are lost", metadata: ["error": "\(error)"])
        }
        _ = rooms.waiting.releaseAll()
        for post in saved { handOverHeld(post) }
        giveUpWaitingPosts(now: UInt64(wallClockMillis()))
        saveHeldPosts() // those handed over are out
    }

    /// A held post decrypted and handed over when the application takes it now (else held
    /// again, as it is), or held again when its key is still missing.
    private func handOverHeld(_ post: HeldRoomPosts.Post) {
        guard rooms.mayDeliverLate() else { return rooms.waiting.keep(post) }
        openPost(post.message, arrivedAt: post.since).map(rooms.deliverLate)
    }

    /// Replaces the held posts in the device's store with `rooms.held`.
    private func saveHeldPosts() {
        do {
            try store.save(RoomPosts.storeName, SecretBytes(RoomPosts.encoded(rooms.held)))
        } catch {
            logger.warning("cannot keep the held room posts: a restart before their keys arrive loses them", metadata: ["error": "\(error)"])
        }
    }

    /// Tells the user that a post given up cannot be read (its author is asked for it by
    /// `tellAuthorsOfUnreadPosts`).
    private func tellGivenUp(_ givenUp: HeldRoomPosts.GivenUp) {
        let post = givenUp.message
        logger.warning(
            "cannot decrypt a room post", metadata: ["room": "\(post.fromUser)", "author": "\(post.author)", "error": "\(givenUp.reason)"])
        onNotice(.undecryptable(user: post.author, messageId: post.messageId, reason: givenUp.reason.description))
    }

    /// Tells the authors of the posts given up that this device could not read them: a resend
    /// request (docs/E2E.md §7.5) for the author's own id of the post, to each of the author's
    /// devices. A post is never sent again (this device's keys were reset after it was sealed,
    /// or it was never given one): the author's client tells its user who could not read it.
    func tellAuthorsOfUnreadPosts(via engine: ClientEngine) {
        for asked in rooms.waiting.takeRequestsToAuthors() {
            let author = asked.fromUser
            let known = ((try? messenger.devices(of: author)) ?? []).map(\.device)
            let devices =
                known.isEmpty
                ? fetchDevices(of: author, via: engine).map { [self] in ((try? messenger.devices(of: author)) ?? []).map(\.device) }
                : engine.eventLoop.makeSucceededFuture(known)
            devices.whenSuccess { [self] devices in
                for device in devices { askAgain(for: asked, device: device, via: engine) }
            }
        }
    }
}
