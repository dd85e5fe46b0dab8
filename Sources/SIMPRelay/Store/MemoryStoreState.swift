import NIOCore
import SIMPCore

/// What `InMemoryRelayStore` keeps, with the same meaning as the Redis schema (docs/PROTOCOL.md
/// §7) but without expiry other than the inbox TTL: credentials, registrations (one per
/// session), known users and their known receiving devices, a log per user with a cursor per
/// device (its cap and TTL), rooms with numbered posts, presence.
struct MemoryStoreState: Sendable {
    var limits: RedisRelayStore.Limits
    var credentials: [String: PasswordVerifier] = [:]
    /// user → session token → registration.
    var registrations: [String: [String: Registration]] = [:]
    /// user → its operator-ended marker or newest receiving session's token.
    var newestSession: [String: String] = [:]
    var known: Set<String> = []
    /// user → its known receiving devices → when each last registered (ms since the epoch).
    var devices: [String: [String: Int64]] = [:]
    /// user → its log of stored messages.
    var logs: [String: MemoryUserLog] = [:]
    var roomMembers: [String: Set<String>] = [:]
    var roomSeq: [String: UInt64] = [:]
    /// `room` → `author/messageId` → seq, so a retransmitted post is numbered once.
    var roomPosts: [String: [String: UInt64]] = [:]
    /// `room/author/messageId` → members who have the post.
    var roomDelivered: [String: Set<String>] = [:]
    var presence: [String: PresenceEntry] = [:]
    /// The users whose latest receiving login turned presence off.
    var presenceOff: Set<String> = []
    /// user → the users it sent content to → when that was noted (ms since the epoch), at most
    /// `ContactStore.defaultMaxContacts` per user.
    var contacts: [String: [String: Int64]] = [:]
    /// The relays whose liveness record exists (renewed, not withdrawn since the last reset).
    var relayRecords: Set<String> = []
    /// user → device → its published key bundle (docs/PROTOCOL.md §4.8).
    var keyBundles: [String: [String: [UInt8]]] = [:]
    /// Each user's signed device list, as published (docs/E2E.md §3.4).
    var deviceLists: [String: [UInt8]] = [:]
    /// user → device → its one-time prekeys not handed out yet.
    var oneTimePrekeys: [String: [String: [[UInt8]]]] = [:]
    /// user → who fetched its bundles → when (ms since the epoch).
    var keyWatchers: [String: [String: Int64]] = [:]
    /// Files held for offline receivers (docs/PROTOCOL.md §5.7).
    var heldFiles = MemoryHeldFiles()
    /// The key directory log's leaf hashes (docs/E2E.md §18), oldest first.
    var keyLog: [[UInt8]] = []
    /// user → the leaf of its current device list.
    var deviceListLeaf: [String: Int] = [:]
    /// The relay's tree key, made on first use.
    var treeKey: TreeKeySecret?

    init(limits: RedisRelayStore.Limits) { self.limits = limits }

    /// The members of `user`'s rooms (the user among them).
    func roomPeers(of user: String) -> Set<String> {
        roomMembers.values.filter { $0.contains(user) }.reduce(into: Set<String>()) { $0.formUnion($1) }
    }

    /// Whether `user` shares a conversation with `peer` (`ContactStore.share`): it sent `peer`
    /// content (or, `eitherWay`, one sent the other content), or both are members of one room.
    func shares(_ user: String, with peer: String, eitherWay: Bool = false) -> Bool {
        contacts[user]?[peer] != nil || (eitherWay && contacts[peer]?[user] != nil)
            || roomMembers.values.contains { $0.contains(user) && $0.contains(peer) }
    }

    /// Carries out everything but publishing (which needs the subscribers).
    mutating func answer(_ request: StoreRequest, now: Int64) -> StoreAnswer {
        switch request {
        case .recordLogin: // the in-memory store shares no counts: each relay keeps its own (RelayLogin)
            return .written
        case .fetchVerifier(let user, let connection, _): // answered by InMemoryRelayStore, which knows the locks
            return .fetchVerifier(connection: connection, credentials[user])
        case .register(let registration, let connection):
            if tooManyDevices(registration, now: now) {
                return .limitReached(request, reason: RelayCore.tooManyDevicesText(device: registration.device, limit: limits.maxDevicesPerUser))
            }
            let devices = register(registration, now: now)
            return .register(connection: connection, knownDevices: devices.knownDevices, elsewhere: devices.elsewhere)
        case .unregister(let user, let session, _):
            registrations[user]?[session] = nil
            if newestSession[user] == session { newestSession[user] = nil }
            return .written
        case .moveRoute(let registration):
            refresh([registration])
            return .written
        case .refresh(let relayId, _, let live):
            refresh(live)
            for registration in live where registration.receives {
                presence[registration.user] = PresenceEntry(user: registration.user, online: true, lastSeen: now)
            }
            return .refresh(relayRecordWasMissing: relayRecords.insert(relayId).inserted)
        case .withdraw(let relayId, let live):
            relayRecords.remove(relayId)
            for registration in live { registrations[registration.user]?[registration.session] = nil }
            return .written
        case .lookup(let user):
            let live = (registrations[user] ?? [:]).values.sorted { $0.session < $1.session }
            return .lookup(
                user: user,
                UserRoutes(
                    receivers: live.filter(\.receives).map(\.route), relays: Set(live.map(\.route.relayId)).sorted(),
                    knownDevices: devices[user]?.count ?? 0, known: !live.isEmpty || known.contains(user) || credentials[user] != nil))
        case .publish(let relay, let delivery):
            return .publish(relay: relay, delivery, listeners: 0)
        case .announceMove:
            return .written
        case .checkSession(let user, let session):
            return .checkSession(user: user, session: session, current: registrations[user]?[session] != nil ? session : newestSession[user])
        case .storeInInbox(let user, let message):
            let entry = InboxEntry(message: message, storedAt: now)
            let oldest = cutoff(now), known = knownDevices(of: user)
            // In place: a copy of the log would copy every entry in it for each one stored.
            let stored = logs[user, default: MemoryUserLog()].store(entry, cap: limits.inboxMaxMessages, cutoff: oldest, known: known)
            return .storeInInbox(user: user, message: message, entry, stored)
        case .loadInbox(let user, let device):
            guard var log = logs[user] else { return .loadInbox(user: user, device: device, [], wallNow: now) }
            let entries = log.load(for: device, cutoff: cutoff(now), known: knownDevices(of: user))
            logs[user] = log
            return .loadInbox(user: user, device: device, entries, wallNow: now, earlier: log.earlier(than: device))
        case .removeFromInbox(let user, let entry, let device):
            let known = knownDevices(of: user)
            logs[user]?.ack(entry.dedupeKey, by: device, known: known)
            return .written
        case .room(let roomRequest):
            return .room(roomRequest, room(roomRequest))
        case .postToRoom(let room, let message):
            return .postToRoom(room: room, message: message, post(message, to: room))
        case .countRoomDelivery(let copy):
            let key = "\(copy.room)/\(copy.author)/\(copy.authorMessageId)"
            roomDelivered[key, default: []].insert(copy.toUser)
            return .countRoomDelivery(copy: copy, delivered: roomDelivered[key]!.count)
        case .recordPresence(let user, let online, let hidden):
            presence[user] = PresenceEntry(user: user, online: online, lastSeen: now)
            if hidden { presenceOff.insert(user) } else { presenceOff.remove(user) }
            return .recordPresence(user: user, online: online, lastSeen: now, roomPeers: roomPeers(of: user).sorted(), hidden: hidden)
        case .noteContact(let user, let peer):
            contacts[user, default: [:]][peer] = now
            if let oldest = contacts[user]?.min(by: { $0.value < $1.value }), contacts[user]!.count > ContactStore.defaultMaxContacts {
                contacts[user]?[oldest.key] = nil
            }
            return .written
        case .who(let who):
            let users: [String]
            if let room = who.room {
                guard let members = roomMembers[room], members.contains(who.user) else { return .who(who, nil) }
                users = members.sorted()
            } else {
                users = who.users
            }
            return .who(
                who,
                users.map {
                    var entry = presence[$0] ?? PresenceEntry(user: $0, online: false, lastSeen: 0)
                    entry.sharesConversation = who.room != nil || shares($0, with: who.user)
                    entry.hidden = presenceOff.contains($0)
                    return entry
                })
        case .publishKeys(let keys):
            guard makeRoomForBundle(of: keys) else {
                return .limitReached(request, reason: RelayCore.tooManyDevicesText(device: keys.device, limit: limits.maxDevicesPerUser))
            }
            let earlier = keyBundles[keys.user]?[keys.device]
            let change: KeysPublish.Change = earlier == nil ? .newDevice : earlier == keys.bundle ? .unchanged : .changed
            let period = RelayCore.keyWatchPeriod.nanoseconds / 1_000_000
            let onlyDevice = (keyBundles[keys.user] ?? [:]).keys.allSatisfy { $0 == keys.device } // its first keys: every watcher hears
            let watchers = (keyWatchers[keys.user] ?? [:]).filter {
                now - $0.value < period && (onlyDevice || shares(keys.user, with: $0.key, eitherWay: true))
            }.keys.sorted()
            keyBundles[keys.user, default: [:]][keys.device] = keys.bundle
            if !keys.deviceList.isEmpty, deviceLists[keys.user] != keys.deviceList {
                deviceLists[keys.user] = keys.deviceList
                keyLog.append(KeyLogSnapshot.leafHash(of: keys.deviceList))
                deviceListLeaf[keys.user] = keyLog.count - 1
            }
            // In the order published (not a Set's, which differs between runs): which prekey a
            // fetch claims replays with the simulator's seed.
            var left = oneTimePrekeys[keys.user]?[keys.device] ?? []
            for prekey in keys.oneTimePrekeys where left.count < RelayCore.maxOneTimePrekeysPerDevice && !left.contains(prekey) {
                left.append(prekey)
            }
            oneTimePrekeys[keys.user, default: [:]][keys.device] = left
            return .publishKeys(keys, prekeysLeft: left.count, change: change, watchers: watchers)
        case .fetchKeys(let fetch):
            if !fetch.asker.isEmpty { keyWatchers[fetch.user, default: [:]][fetch.asker] = now }
            let devices = (keyBundles[fetch.user] ?? [:]).sorted { $0.key < $1.key }.map { device, bundle in
                let claimed = fetch.skipClaimFor.contains(device) ? nil : oneTimePrekeys[fetch.user]?[device]?.popLast()
                let left = claimed == nil ? nil : oneTimePrekeys[fetch.user]?[device]?.count
                return DeviceKeys(device: device, bundle: bundle, oneTimePrekey: claimed, prekeysLeft: left)
            }
            let exists = !devices.isEmpty || known.contains(fetch.user) || credentials[fetch.user] != nil
            if treeKey == nil {
                var random = SystemRandomNumberGenerator()
                treeKey = KeyLogSnapshot.newTreeKeySecret(using: &random)
            }
            let log = treeKey.map {
                KeyLogSnapshot(leafHashes: keyLog, listIndex: deviceListLeaf[fetch.user], treeKeySecret: $0, timestampMillis: UInt64(max(0, now)))
            }
            return .fetchKeys(fetch, devices, known: exists, deviceList: deviceLists[fetch.user] ?? [], log: log)
        case .holdFileChunk(let chunk):
            let retention = Int64(limits.heldFileRetentionSeconds) * 1000
            return .holdFileChunk(
                chunk, heldFiles.hold(chunk, maxBytesPerUser: limits.heldFilesMaxBytesPerUser, retentionMillis: retention, now: now))
        case .fetchHeldChunks(let fetch):
            return .fetchHeldChunks(fetch, heldFiles.fetch(fetch, now: now))
        case .releaseHeldFile(let owner, let fileId, let recipient, let device):
            let firstTime = heldFiles.release(
                owner: owner, fileId: fileId, recipient: recipient, device: device, devices: knownDevices(of: recipient))
            return .releaseHeldFile(owner: owner, fileId: fileId, recipient: recipient, device: device, firstTime: firstTime)
        case .grantHeldFile(let grant):
            return .grantHeldFile(grant, heldFiles.grant(grant, maxBytesPerUser: limits.heldFilesMaxBytesPerUser, now: now))
        }
    }

    /// Writes a registration: a receiving session replaces its device's older one, and its
    /// device becomes known (the user's first device gets what was stored before, a later one
    /// what is stored from now on).
    private mutating func register(_ registration: Registration, now: Int64) -> (knownDevices: Int, elsewhere: Bool) {
        let user = registration.user
        known.insert(user)
        if registration.receives {
            registrations[user] = (registrations[user] ?? [:]).filter { !($0.value.receives && $0.value.device == registration.device) }
            newestSession[user] = registration.session
            let live = Set((registrations[user] ?? [:]).values.filter(\.receives).map(\.device))
            let forgotten = (devices[user] ?? [:]).filter { $0.key != registration.device && $0.value < cutoff(now) && !live.contains($0.key) }
            for device in forgotten.keys { devices[user]?[device] = nil }
            if devices[user]?[registration.device] == nil {
                logs[user]?.deviceBecameKnown(registration.device, first: (devices[user] ?? [:]).isEmpty)
            }
            devices[user, default: [:]][registration.device] = now
            let known = knownDevices(of: user)
            logs[user]?.forget(Array(forgotten.keys), known: known)
        } else if newestSession[user] == RelayCore.sessionEndedByOperator {
            newestSession[user] = nil
        }
        registrations[user, default: [:]][registration.session] = registration
        let elsewhere = registrations[user]!.values.contains { $0.route.relayId != registration.route.relayId }
        return (devices[user]?.count ?? 0, elsewhere)
    }

    /// Whether `registration` is of a receiving device that would be one more than its user may have.
    private func tooManyDevices(_ registration: Registration, now: Int64) -> Bool {
        let user = registration.user
        guard registration.receives, devices[user]?[registration.device] == nil else { return false }
        let live = Set((registrations[user] ?? [:]).values.filter(\.receives).map(\.device))
        return (devices[user] ?? [:]).filter { $0.value >= cutoff(now) || live.contains($0.key) }.count >= limits.maxDevicesPerUser
    }

    /// Whether the bundle of `keys` may be kept: its device has one, or the user has fewer than
    /// it may have once the bundles of devices no longer known are dropped (as in Redis).
    private mutating func makeRoomForBundle(of keys: KeysPublish) -> Bool {
        let bundles = keyBundles[keys.user] ?? [:]
        guard bundles[keys.device] == nil, bundles.count >= limits.maxDevicesPerUser else { return true }
        for device in bundles.keys where devices[keys.user]?[device] == nil {
            keyBundles[keys.user]?[device] = nil
            oneTimePrekeys[keys.user]?[device] = nil
        }
        return (keyBundles[keys.user]?.count ?? 0) < limits.maxDevicesPerUser
    }

    private mutating func refresh(_ live: [Registration]) {
        for registration in live where newestSession[registration.user] != RelayCore.sessionEndedByOperator {
            let owner = registrations[registration.user]?.values.first { $0.receives && $0.device == registration.device }
            if registration.receives, let owner, owner.session != registration.session { continue }
            registrations[registration.user, default: [:]][registration.session] = registration
        }
    }

    /// Ends every session of `user` as `simp-server sessions end` does.
    mutating func endSessions(of user: String) {
        registrations[user] = nil
        newestSession[user] = RelayCore.sessionEndedByOperator
    }

    /// Entries stored before it are older than the TTL.
    private func cutoff(_ now: Int64) -> Int64 { now - Int64(limits.inboxTTLSeconds) * 1000 }

    /// `user`'s known receiving devices.
    private func knownDevices(of user: String) -> [String] { (devices[user] ?? [:]).keys.sorted() }

    private mutating func room(_ request: RoomRequest) -> RoomAnswer {
        switch request.operation {
        case .join:
            if let refusal = RoomStore.joinRefusal(
                request, roomsOfUser: roomMembers.values.filter { $0.contains(request.user) }.count,
                isMember: roomMembers[request.room]?.contains(request.user) ?? false, members: roomMembers[request.room]?.count ?? 0)
            {
                return refusal
            }
            roomMembers[request.room, default: []].insert(request.user)
            return .members(roomMembers[request.room]!.sorted())
        case .leave:
            roomMembers[request.room]?.remove(request.user)
            return .members([])
        case .members:
            guard let members = roomMembers[request.room], members.contains(request.user) else { return .notAMember }
            return .members(members.sorted())
        }
    }

    private mutating func post(_ message: SIMPMessage, to room: String) -> RoomPostResult {
        guard let members = roomMembers[room], members.contains(message.fromUser) else { return .notAMember }
        let key = "\(message.fromUser)/\(message.messageId)"
        if let seq = roomPosts[room]?[key] { return .posted(seq: seq, members: members.sorted(), duplicate: true) }
        let seq = roomSeq[room, default: 0] + 1
        roomSeq[room] = seq
        roomPosts[room, default: [:]][key] = seq
        return .posted(seq: seq, members: members.sorted(), duplicate: false)
    }
}
