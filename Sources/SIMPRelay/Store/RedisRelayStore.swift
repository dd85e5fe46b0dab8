import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SIMPCore
import SIMPRedis

/// The relay's store in Redis or Redis Cluster (keys in docs/PROTOCOL.md §7): each request is
/// carried out by the part of the schema it concerns (`Registry`, `CredentialStore`,
/// `InboxStore`, `RoomStore`, `PresenceStore`, `RelayBus`, `HeldFileStore`). Publishes made in one event-loop
/// turn go out in one pipeline (on a cluster, split per master).
///
/// Every part holds the same `redis: any RedisCommands` (a `RedisClient` or a
/// `RedisClusterClient`, made from the endpoint), builds its keys with `KeyTag` so that what one
/// command, Lua script or `MULTI` touches shares a cluster slot, and lists keys with
/// `scanKeys` (every master). A new part is a struct holding `redis: any RedisCommands`, made
/// here from `redis` like the others.
public final class RedisRelayStore: RelayStore {
    public let redis: any RedisCommands
    let registry: Registry
    let credentials: CredentialStore
    let inboxes: InboxStore
    let rooms: RoomStore
    let presence: PresenceStore
    let contacts: ContactStore
    let bus: RelayBus
    let keyBundles: KeyBundleStore
    let heldFiles: HeldFileStore
    private let endpoint: RedisEndpoint
    public var inboxRedis: RedisEndpoint? { endpoint }
    private let logger: Logger
    private let subscriber = NIOLockedValueBox<(any RedisSubscription)?>(nil)
    private let publishes = PublishBatcher()

    /// Settings of the schema.
    public struct Limits: Sendable {
        /// Seconds the relay's liveness record, which vouches for all its registrations (and so
        /// its users' presence), lives without a renewal.
        public var registrationTTLSeconds = 30
        /// Seconds a user's registrations key lives after its latest write (a backstop: relays
        /// re-write their sessions every `RelayCore.Configuration.registrationSweepInterval`).
        public var registrationEntryTTLSeconds = 24 * 3600
        /// Entries kept per user's log; a full log refuses new ones (what no device has is never dropped).
        public var inboxMaxMessages = 1000
        /// Seconds a message may wait in a user's log.
        public var inboxTTLSeconds = 7 * 24 * 3600
        /// Devices a user may have (receiving devices, devices with a key bundle).
        public var maxDevicesPerUser = RelayLimits().maxDevicesPerUser
        /// Bytes of files one sender may have held for offline receivers at once
        /// (`--file-store-max-bytes-per-user`; docs/PROTOCOL.md §5.7).
        public var heldFilesMaxBytesPerUser: UInt64 = Self.defaultHeldFilesMaxBytesPerUser
        /// Seconds a held file is kept after its last chunk arrived (`--file-store-retention`).
        public var heldFileRetentionSeconds = HeldFileRetention.defaultSeconds
        /// 1 GiB.
        public static let defaultHeldFilesMaxBytesPerUser: UInt64 = 1 << 30
        public init() {}
    }

    /// A store on one Redis server.
    public convenience init(url: RedisURL, limits: Limits = Limits(), logger: Logger) {
        self.init(endpoint: .single(url), limits: limits, logger: logger)
    }

    /// A store on `endpoint`, one server or a cluster; its connections live on `eventLoop`
    /// (pass the relay's loop: no thread hops).
    public init(
        endpoint: RedisEndpoint, limits: Limits = Limits(), logger: Logger,
        eventLoop: EventLoop = MultiThreadedEventLoopGroup.singleton.next()
    ) {
        self.endpoint = endpoint
        self.logger = logger
        let redis = endpoint.makeClient(eventLoop: eventLoop, logger: logger)
        self.redis = redis
        self.registry = Registry(
            redis: redis, liveness: RelayLiveness(redis: redis, ttlSeconds: limits.registrationTTLSeconds),
            entryTTLSeconds: limits.registrationEntryTTLSeconds, deviceTTLSeconds: limits.inboxTTLSeconds, maxDevices: limits.maxDevicesPerUser)
        self.credentials = CredentialStore(redis: redis)
        self.inboxes = InboxStore(redis: redis, maxMessages: limits.inboxMaxMessages, ttlSeconds: limits.inboxTTLSeconds)
        self.rooms = RoomStore(redis: redis, postTTLSeconds: limits.inboxTTLSeconds)
        self.presence = PresenceStore(redis: redis)
        self.contacts = ContactStore(redis: redis)
        self.bus = RelayBus(redis: redis)
        self.keyBundles = KeyBundleStore(redis: redis, maxDevices: limits.maxDevicesPerUser)
        self.heldFiles = HeldFileStore(
            redis: redis, maxBytesPerUser: limits.heldFilesMaxBytesPerUser, retentionSeconds: limits.heldFileRetentionSeconds)
    }

    public var roundTrips: Int { redis.roundTrips }

    /// Checks that Redis answers, and that a single-server URL does not name a cluster node
    /// (whose other slots would answer every command with `MOVED`), then loads the user-log
    /// scripts on every master. A script's first `EVALSHA` on a server that lacks it is answered
    /// NOSCRIPT and sent again as `EVAL` after the calls made meanwhile, so messages stored
    /// then would enter the log out of order (a fresh Redis reordered 1 test run in 10).
    public func ping() async throws {
        let replies = try await redis.pipeline([["PING"], ["INFO", "cluster"]])
        if !redis.isCluster, replies[1].string?.contains("cluster_enabled:1") == true {
            throw StoreFailure("\(endpoint) is a node of a Redis Cluster: name the cluster as redis+cluster://HOST:PORT[,HOST:PORT…]")
        }
        let loads = UserLogScripts.all.map { ["SCRIPT", "LOAD", $0.source] }
        for master in try await redis.masters().get() {
            for reply in try await master.pipeline(loads) where reply.errorMessage != nil {
                throw StoreFailure("\(endpoint) refused a script: \(reply.errorMessage!)")
            }
        }
    }

    public func decoySecret() async throws -> [UInt8] {
        try await credentials.decoySecret()
    }

    public func perform(_ request: StoreRequest, on eventLoop: EventLoop) -> EventLoopFuture<StoreAnswer> {
        let now = WallClock.millisecondsSinceEpoch()
        switch request {
        case .fetchVerifier(let user, let connection, let host):
            return credentials.login(of: user, from: host, on: connection, on: eventLoop)
        case .recordLogin(let outcome):
            return credentials.record(outcome, on: eventLoop).map { .written }
        case .register(let registration, let connection):
            return registry.register(registration, on: eventLoop).flatMap { [inboxes, registry] registered in
                inboxes.forget(user: registration.user, devices: registered.forgotten, on: eventLoop).map {
                    guard !registered.tooManyDevices else {
                        return .limitReached(request, reason: RelayCore.tooManyDevicesText(device: registration.device, limit: registry.maxDevices))
                    }
                    return .register(connection: connection, knownDevices: registered.knownDevices, elsewhere: registered.elsewhere)
                }
            }
        case .unregister(let user, let session, let device):
            return registry.unregister(user: user, session: session, device: device, on: eventLoop).map { .written }
        case .moveRoute(let registration):
            return registry.refresh([registration], on: eventLoop).map { .written }
        case .refresh(let relayId, let description, let registrations):
            // The renewal goes first, so a new incarnation it starts is the one written below.
            return registry.liveness.renew(relayId: relayId, description: description, on: eventLoop).flatMap { [registry] lost in
                registry.refresh(registrations, on: eventLoop).map { .refresh(relayRecordWasMissing: lost) }
            }
        case .withdraw(let relayId, let registrations):
            return registry.withdraw(relayId: relayId, registrations: registrations, on: eventLoop).map { .written }
        case .lookup(let user):
            return registry.lookup(user: user, on: eventLoop).map { .lookup(user: user, $0) }
        case .publish(let relay, let delivery):
            return publishes.publish(relay: relay, delivery, via: bus, on: eventLoop)
        case .announceMove(let move):
            return bus.announce(move, on: eventLoop).map { _ in .written }
        case .checkSession(let user, let session):
            return registry.currentSession(of: user, session: session, on: eventLoop).map { .checkSession(user: user, session: session, current: $0) }
        case .storeInInbox(let user, let message):
            let entry = InboxEntry(message: message, storedAt: now)
            return inboxes.store(entry, for: user, wallNow: now, on: eventLoop).map { .storeInInbox(user: user, message: message, entry, $0) }
        case .loadInbox(let user, let device):
            return inboxes.load(user: user, device: device, wallNow: now, on: eventLoop).map {
                .loadInbox(user: user, device: device, $0.entries, wallNow: now, earlier: $0.earlier)
            }
        case .removeFromInbox(let user, let entry, let device):
            return inboxes.remove(entry, for: user, device: device, on: eventLoop).map { .written }
        case .room(let roomRequest):
            return rooms.answer(roomRequest, on: eventLoop).map { .room(roomRequest, $0) }
        case .postToRoom(let room, let message):
            return rooms.post(message, to: room, on: eventLoop).map { .postToRoom(room: room, message: message, $0) }
        case .countRoomDelivery(let copy):
            return rooms.countDelivery(of: copy, to: copy.toUser, on: eventLoop).map { .countRoomDelivery(copy: copy, delivered: $0) }
        case .recordPresence(let user, let online, let hidden):
            return presence.record(user: user, online: online, hidden: hidden, now: now, on: eventLoop).map {
                .recordPresence(user: user, online: online, lastSeen: now, roomPeers: $0, hidden: hidden)
            }
        case .noteContact(let user, let peer):
            return contacts.note(user: user, peer: peer, now: now, on: eventLoop).map { .written }
        case .who(let who):
            return whoAnswer(who, on: eventLoop).map { .who(who, $0) }
        case .publishKeys(let keys):
            return keyBundles.publish(keys, on: eventLoop).flatMap { [keyBundles, contacts, redis] kept in
                guard let kept else {
                    let reason = RelayCore.tooManyDevicesText(device: keys.device, limit: keyBundles.maxDevices)
                    return eventLoop.makeSucceededFuture(.limitReached(request, reason: reason))
                }
                // Only watchers who wrote to the user, or whom it wrote to, or who share a room
                // with it hear of its devices (fetching its keys is not enough); all do of its
                // only device (the first keys, which a waiting first message needs).
                let shared = contacts.share(kept.watchers.map { (user: keys.user, peer: $0) }, eitherWay: true, on: eventLoop)
                let devices = redis.pipeline([["HLEN", KeyBundleStore.bundlesKey(keys.user)]], on: eventLoop)
                return shared.and(devices).map { shared, devices in
                    let onlyDevice = devices.first?.integer == 1
                    let watchers = zip(kept.watchers, shared).filter { onlyDevice || $0.1 }.map(\.0)
                    return .publishKeys(keys, prekeysLeft: kept.left, change: kept.change, watchers: watchers)
                }
            }
        case .fetchKeys(let fetch):
            return keyBundles.fetch(fetch, on: eventLoop).map {
                .fetchKeys(fetch, $0.devices, known: $0.known, deviceList: $0.deviceList, log: $0.log)
            }
        case .holdFileChunk(let chunk):
            return heldFiles.hold(chunk, on: eventLoop).map { .holdFileChunk(chunk, $0) }
        case .fetchHeldChunks(let fetch):
            return heldFiles.fetch(fetch, on: eventLoop).map { .fetchHeldChunks(fetch, $0) }
        case .releaseHeldFile(let owner, let fileId, let recipient, let device):
            return heldFiles.release(owner: owner, fileId: fileId, recipient: recipient, device: device, on: eventLoop).map {
                .releaseHeldFile(owner: owner, fileId: fileId, recipient: recipient, device: device, firstTime: $0)
            }
        case .grantHeldFile(let grant):
            return heldFiles.grant(grant, on: eventLoop).map { .grantHeldFile(grant, $0) }
        }
    }

    /// The presence of the asked users, or of the room's members (nil: the asker is not one),
    /// with whether each shares a conversation or a room with the asker (a room's members do).
    private func whoAnswer(_ request: WhoRequest, on eventLoop: EventLoop) -> EventLoopFuture<[PresenceEntry]?> {
        let users: EventLoopFuture<[String]?> =
            request.room.map { rooms.members(of: $0, askedBy: request.user, on: eventLoop) }
            ?? eventLoop.makeSucceededFuture(request.users)
        return users.flatMap { [presence, registry, contacts] users in
            guard let users else { return eventLoop.makeSucceededFuture(nil) }
            let shared =
                request.room != nil
                ? eventLoop.makeSucceededFuture(users.map { _ in true })
                : contacts.share(users.map { (user: $0, peer: request.user) }, on: eventLoop)
            // Online: a relay vouches for a receiving session of the user (the record's state
            // may say online for a user whose relay died).
            return presence.lookup(users, on: eventLoop).and(registry.online(users, on: eventLoop)).and(shared).map { found, shared in
                zip(found.0, shared).map { entry, shares in
                    var entry = entry
                    entry.online = found.1.contains(entry.user)
                    if entry.online { entry.lastSeen = max(entry.lastSeen, 0) } // a user a relay vouches for exists
                    entry.sharesConversation = shares
                    return entry
                }
            }
        }
    }

    public func subscribe(relayId: String, on eventLoop: EventLoop, _ handler: @escaping @Sendable (RelayStoreEvent) -> Void) -> EventLoopFuture<Void>
    {
        let ready = eventLoop.makePromise(of: Void.self)
        let delivery = RelayBus.deliveryChannel(relayId)
        let subscriber = endpoint.makeSubscriber(
            client: redis, channels: redis.isCluster ? [RelayBus.movesChannel] : [delivery, RelayBus.movesChannel],
            shardChannels: redis.isCluster ? [delivery] : [], eventLoop: eventLoop, logger: logger,
            onSubscribed: {
                eventLoop.execute { handler(.subscribed) }
                ready.succeed()
            },
            onMessage: { channel, payload in
                let event = Self.event(channel: channel, payload: payload)
                eventLoop.execute { handler(event) }
            })
        self.subscriber.withLockedValue { $0 = subscriber }
        subscriber.start()
        return ready.futureResult
    }

    private static func event(channel: String, payload: [UInt8]) -> RelayStoreEvent {
        guard channel == RelayBus.movesChannel else { return .delivery(ByteBuffer(bytes: payload)) }
        guard let move = UserMove(encoded: String(decoding: payload, as: UTF8.self)) else { return .malformed("move announcement") }
        return .move(move)
    }

    public func shutdown() async {
        await subscriber.withLockedValue { $0 }?.stop()
        await redis.shutdown()
    }
}

/// Collects the publishes asked for in one event-loop turn and sends them in one pipeline.
/// Each publish's future holds its answer as it is (no `map` per publish: a read burst's
/// replies complete one promise each, not a promise and a mapped future).
private final class PublishBatcher: Sendable {
    private struct Pending {
        var deliveries: [(relay: String, delivery: RelayDelivery)] = []
        var promises: [EventLoopPromise<StoreAnswer>] = []
    }

    private let pending = NIOLockedValueBox(Pending())

    func publish(relay: String, _ delivery: RelayDelivery, via bus: RelayBus, on eventLoop: EventLoop) -> EventLoopFuture<StoreAnswer> {
        let promise = eventLoop.makePromise(of: StoreAnswer.self)
        let first = pending.withLockedValue { pending in
            pending.deliveries.append((relay, delivery))
            pending.promises.append(promise)
            return pending.promises.count == 1
        }
        if first { eventLoop.execute { self.flush(via: bus, on: eventLoop) } }
        return promise.futureResult
    }

    private func flush(via bus: RelayBus, on eventLoop: EventLoop) {
        let batch = pending.withLockedValue { pending in
            defer { pending = Pending() }
            return pending
        }
        guard !batch.promises.isEmpty else { return }
        bus.publish(batch.deliveries, on: eventLoop).whenComplete { result in
            switch result {
            case .success(let listeners):
                for (index, promise) in batch.promises.enumerated() {
                    let (relay, delivery) = batch.deliveries[index]
                    promise.succeed(.publish(relay: relay, delivery, listeners: index < listeners.count ? listeners[index] : 0))
                }
            case .failure(let error):
                for promise in batch.promises { promise.fail(error) }
            }
        }
    }
}
