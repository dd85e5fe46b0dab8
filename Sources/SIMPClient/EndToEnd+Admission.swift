import NIOCore
import SIMPCore
import SIMPE2E

/// Room admission (docs/E2E.md §8.4): this device hands its sender key only to members that a
/// member admitted (`RoomAdmission` decides; this carries it out). A user who joins by name is
/// told to the user and gets nothing until a member admits it; an admit goes end to end to
/// the other admitted members, and each hands the newcomer its next sender key.
extension EndToEnd {
    /// `room`'s admission state (from the device's store the first time it is asked for).
    func admission(of room: String) -> RoomAdmission {
        if let known = rooms.admission[room] { return known }
        var loaded = RoomAdmission(roomID: room, localUser: user)
        do {
            if let bytes = try store.load(RoomAdmission.storeName(room)), !bytes.isEmpty {
                loaded = try RoomAdmission(roomID: room, localUser: user, encoded: bytes)
            }
        } catch {
            logger.warning(
                "cannot read who was admitted to a room; its next member list admits its members", metadata: ["room": "\(room)", "error": "\(error)"])
        }
        rooms.admission[room] = loaded
        return loaded
    }

    /// Replaces `room`'s admission state (in memory and in the device's store).
    func keep(_ admission: RoomAdmission) {
        rooms.admission[admission.roomID] = admission
        do {
            try store.save(RoomAdmission.storeName(admission.roomID), SecretBytes(admission.encoded))
        } catch {
            logger.warning("cannot keep who was admitted to a room", metadata: ["room": "\(admission.roomID)", "error": "\(error)"])
        }
    }

    /// The relay answered a room request of this client: a join or a member list is news for
    /// the admission state (a user not admitted is told; a member gone is no longer admitted),
    /// a leave forgets it (the first post after joining again is a first use again).
    func roomAnswered(_ kind: SIMPMessage.Kind, room: String, members: [String]) {
        switch kind {
        case .roomLeave:
            keep(RoomAdmission(roomID: room, localUser: user))
        case .roomJoin, .roomMembers:
            guard members.contains(user) else { return }
            var state = admission(of: room)
            let before = state
            let events = state.membersListed(members, now: UInt64(wallClockMillis()))
            if state != before { keep(state) }
            for event in events { tell(event, in: room) }
        default:
            return
        }
    }

    /// This device posts to `room`, or admits someone, and the relay lists `members`: the
    /// first time, they are all admitted (`RoomAdmission.firstUse`). The state after.
    func usedRoom(_ room: String, members: [String]) -> RoomAdmission {
        var state = admission(of: room)
        if !members.isEmpty, state.firstUse(members) { keep(state) }
        return state
    }

    /// A room copy arrived: when its member count differs from the last one seen, the relay is
    /// asked for the members (someone may have joined by name, or left), so that a listener who
    /// never posts still hears of a join attempt.
    func watchMembers(after copy: SIMPMessage, via engine: ClientEngine) {
        let room = String(copy.fromUser.dropFirst())
        guard copy.memberCount != 0, rooms.memberCounts[room] != copy.memberCount else { return }
        rooms.memberCounts[room] = copy.memberCount
        // Asked after the session handed this copy over (not while it does); the answer goes
        // to `roomAnswered`.
        engine.eventLoop.execute { _ = engine.roomRequest(.roomMembers, room: room) }
    }

    /// This user admits `admitted` to `room`: kept here, and sent end to end to every other
    /// admitted member (their devices fetched when their lists are old). Each member then
    /// includes `admitted`'s devices in its next sender key. The future completes once every
    /// admit has its outcome.
    func admit(_ admitted: String, to room: String, via engine: ClientEngine) -> EventLoopFuture<Void> {
        engine.roomRequest(.roomMembers, room: room).flatMap { [self] members in
            var state = usedRoom(room, members: members)
            if let event = state.admit(admitted) { tell(event, in: room) }
            keep(state)
            let others = state.readers(among: members).filter { $0 != admitted }
            return prepareSessions(with: others, via: engine).flatMapThrowing { [self] in
                let plaintext = RoomAdmit(roomID: room, user: admitted).encoded
                return try others.filter { try !messenger.devices(of: $0).isEmpty }.map { member in
                    let envelope = try messenger.seal(plaintext, to: member)
                    let (id, outcome) = engine.send(SIMPMessage(kind: .text, toUser: member).sealedEndToEnd(envelope))
                    sentLog.record(id, nil, now: engine.now) // not sent again if asked (EndToEnd+Resend)
                    return outcome
                }
            }.flatMap { outcomes in
                EventLoopFuture.whenAllComplete(outcomes, on: engine.eventLoop).map { _ in }
            }
        }
    }

    /// A direct message carrying an admit (`RoomAdmit`): taken when its sender is admitted
    /// here, and the user told. Not shown as a message (nil).
    func takeAdmit(_ plaintext: [UInt8], from sender: String) -> SIMPMessage? {
        do {
            let admit = try RoomAdmit(encoded: plaintext)
            var state = admission(of: admit.roomID)
            guard let event = state.admitReceived(admit, from: sender) else {
                if !state.admitted.contains(sender) {
                    logger.notice("ignoring an admit from a user not admitted here", metadata: ["room": "\(admit.roomID)", "from": "\(sender)"])
                }
                return nil
            }
            keep(state)
            tell(event, in: admit.roomID)
        } catch {
            logger.warning("ignoring an admit", metadata: ["from": "\(sender)", "error": "\(error)"])
        }
        return nil
    }

    /// Fetches the device lists of `members` that are old, and restarts sessions restored from
    /// a copy (EndToEnd+Resend), before something is sealed for them; a member whose devices
    /// cannot be fetched now keeps the devices this device knows.
    func prepareSessions(with members: [String], via engine: ClientEngine) -> EventLoopFuture<Void> {
        let fetches = members.map { member in
            let stale = fetchedAt[member].map { engine.now - $0 >= settings.deviceListLifetime } ?? true
            let fetched = stale ? fetchDevices(of: member, via: engine).recover { _ in } : engine.eventLoop.makeSucceededVoidFuture()
            return fetched.flatMap { [self] in restartCopiedSessions(with: member, via: engine).recover { _ in } }
        }
        return EventLoopFuture.andAllComplete(fetches, on: engine.eventLoop)
    }

    private func tell(_ event: RoomAdmission.Event, in room: String) {
        switch event {
        case .waiting(let user): onNotice(.roomJoinNotAdmitted(user: user, room: room))
        case .admitted(let user, let by): onNotice(.roomAdmitted(user: user, room: room, by: by))
        }
    }
}

extension RoomAdmission {
    /// The name of `room`'s admission state in the device's store.
    static func storeName(_ room: String) -> String { "admitted/" + room }
}
