import Logging
import NIOCore
import SIMPCore
import SIMPRedis

/// Counts a relay has kept since it started.
public struct RelayStatistics: Sendable, Equatable {
    public var datagramsReceived = 0
    public var datagramsForwarded = 0
    public var receiptsRouted = 0
    /// Datagrams and receipts handed to other relays through Redis (and heard there).
    public var deliveriesPublished = 0
    public var rejected: [RejectReason: Int] = [:]
    public var connectedUsers = 0
    /// Messages newly stored in offline inboxes (retransmissions of stored ones not counted).
    public var inboxStored = 0
    /// Entries removed from inboxes after delivery or hand-over.
    public var inboxRemoved = 0
}

/// Runs `RelayCore` on the relay's event loop and carries out its actions: writes to
/// channels, Redis calls, counting and logging. Every method runs on `eventLoop`.
final class RelayEngine: @unchecked Sendable { // confined to eventLoop
    let eventLoop: EventLoop
    private var core: RelayCore
    private let registry: Registry
    private let credentials: CredentialStore
    private let bus: RelayBus
    private let inboxStore: InboxStore
    private let roomStore: RoomStore
    let presenceStore: PresenceStore
    private var inboxTimer: Scheduled<Void>?
    private var inboxTimerDeadline: NIODeadline?
    private let logger: Logger
    private let metrics: RelayMetrics
    private var connections: [ConnectionID: Channel] = [:]
    private var heartbeats: HeartbeatTable
    private var nextPingId: UInt64 = 1
    private var nextConnection: UInt64 = 1
    /// Counts kept as things happen; `statistics` adds what the core knows.
    private var counts = RelayStatistics()
    var statistics: RelayStatistics {
        var snapshot = counts
        snapshot.connectedUsers = core.connectedUsers
        return snapshot
    }
    var datagramChannel: Channel?
    /// Set while the relay shuts down: registrations are withdrawn in one batch instead.
    private var withdrawing = false
    /// Set while the relay drains: new datagrams are dropped, receipts still routed.
    private var draining = false
    private var lastReceiptRouted = NIODeadline.now()
    private var reportedRedisRoundTrips = 0
    /// Datagram counts not yet added to the metrics (they are added once per read burst).
    private var unreportedReceived = 0, unreportedForwarded = 0
    /// Control connections with receipts written but not flushed yet.
    private var unflushedReceipts = Set<ConnectionID>()
    private var unflushedChannels: [Channel] = []
    private var datagramFlushScheduled = false
    /// Set while a read burst of datagrams is handled: the datagram handler flushes at its end.
    private var inDatagramBurst = false
    /// Deliveries for other relays decided in this event-loop turn, published together in one
    /// Redis round trip once the turn's reads are handled.
    private var unpublished: [(relay: String, delivery: RelayDelivery)] = []

    init(core: RelayCore, registry: Registry, credentials: CredentialStore, inboxStore: InboxStore, roomStore: RoomStore,
         presenceStore: PresenceStore, heartbeat: HeartbeatPolicy, eventLoop: EventLoop, logger: Logger, metrics: RelayMetrics) {
        self.core = core
        self.credentials = credentials
        self.presenceStore = presenceStore
        self.inboxStore = inboxStore
        self.roomStore = roomStore
        self.heartbeats = HeartbeatTable(policy: heartbeat)
        self.registry = registry
        self.bus = RelayBus(redis: registry.redis)
        self.eventLoop = eventLoop
        self.logger = logger
        self.metrics = metrics
    }

    /// Tells the core the bound UDP port, which CONNECTED reports to clients.
    func setUDPPort(_ port: Int) {
        core.udpPortBound(port)
    }

    /// Stops per-connection unregistering, closes every control connection, and returns the
    /// registrations to withdraw from Redis in one batch.
    func closeAllForShutdown() -> [(user: String, session: String)] {
        withdrawing = true
        let registrations = core.liveRegistrations.map { (user: $0.user, session: $0.session) }
        for channel in connections.values { channel.close(promise: nil) }
        return registrations
    }

    var liveRegistrations: [(user: String, route: Route, session: String)] { core.liveRegistrations }

    // MARK: Shutdown drain

    /// Starts draining: datagrams arriving from now on are dropped (their senders retransmit
    /// elsewhere), receipts for those already forwarded are still routed.
    func beginDrain() {
        draining = true
        lastReceiptRouted = .now()
    }

    /// Whether draining can end: no client is left, or no receipt came for `quietPeriod`.
    func drainSettled(quietPeriod: TimeAmount) -> Bool {
        connections.isEmpty || NIODeadline.now() - lastReceiptRouted >= quietPeriod
    }

    // MARK: Metrics

    /// Brings sampled figures (Redis round trips, inbox depth) into the metrics before an export.
    func updateSampledMetrics(redisRoundTrips: Int) {
        metrics.redisCalls.increment(by: max(0, redisRoundTrips - reportedRedisRoundTrips))
        reportedRedisRoundTrips = max(reportedRedisRoundTrips, redisRoundTrips)
        metrics.inboxDepth.record(core.datagramsAwaitingLookup)
        reportDatagramCounts()
    }

    /// A burst of datagrams read at `start` has been handled and its forwards flushed: the
    /// burst's counts go to the metrics in one step each.
    func datagramBurstCompleted(startedAt start: NIODeadline) {
        inDatagramBurst = false
        metrics.forwardLatency.recordNanoseconds((NIODeadline.now() - start).nanoseconds)
        reportDatagramCounts()
    }

    private func reportDatagramCounts() {
        if unreportedReceived > 0 { metrics.datagramsReceived.increment(by: Int64(unreportedReceived)) }
        if unreportedForwarded > 0 { metrics.datagramsForwarded.increment(by: Int64(unreportedForwarded)) }
        unreportedReceived = 0
        unreportedForwarded = 0
    }

    // MARK: Control connections

    func connectionOpened(_ channel: Channel) -> ConnectionID {
        let id = ConnectionID(nextConnection)
        nextConnection += 1
        connections[id] = channel
        heartbeats.opened(id, now: .now())
        perform(core.connectionOpened(id, peer: channel.remoteAddress, now: .now()))
        return id
    }

    func connectionClosed(_ id: ConnectionID) {
        connections[id] = nil
        heartbeats.closed(id)
        perform(core.connectionClosed(id))
    }

    /// A control connection's read burst ended: sends the receipts it routed.
    func controlReadCompleted() {
        for channel in unflushedChannels { channel.flush() }
        unflushedChannels.removeAll(keepingCapacity: true)
        unflushedReceipts.removeAll(keepingCapacity: true)
    }

    func controlFrame(_ payload: ByteBuffer, on id: ConnectionID, peer: SocketAddress) {
        metrics.controlFramesReceived.increment()
        heartbeats.heard(id, now: .now())
        do {
            let message = try MessageCodec.decode(payload)
            perform(core.controlReceived(message, on: id, peer: peer, now: .now()))
        } catch {
            perform(core.malformedControl(on: id, detail: "\(error)"))
        }
    }

    /// A peer announced a frame above the limit: tell it, count it, close.
    func frameTooLarge(on id: ConnectionID, _ error: FrameTooLargeError) {
        perform([
            .reject(.frameTooLarge, detail: "\(id) announced \(error.announcedSize) bytes"),
            .send(id, .error(.frameTooLarge, "control frames are limited to \(error.maxFrameSize) bytes")),
            .close(id),
        ])
    }

    /// Pings connections that are due and closes those whose client went silent; their
    /// registrations are removed when the channel closes.
    func heartbeatTick() {
        let due = heartbeats.poll(now: .now())
        for id in due.ping {
            var ping = SIMPMessage(kind: .ping, messageId: nextPingId)
            ping.time = WallClock.millisecondsSinceEpoch()
            nextPingId += 1
            connections[id]?.writeAndFlush(ping, promise: nil)
        }
        for id in due.dead {
            perform([.reject(.heartbeatTimeout, detail: "\(id) silent for \(heartbeats.policy.deadAfter)"), .close(id)])
            logger.info("dropped a silent client", metadata: ["connection": "\(id)"])
        }
    }

    // MARK: Datagrams

    /// A datagram from `source`, read at `now` (the start of its read burst); forwards are
    /// flushed per burst.
    func datagram(_ bytes: ByteBuffer, from source: SocketAddress, now: NIODeadline) {
        counts.datagramsReceived += 1
        unreportedReceived += 1
        inDatagramBurst = true
        guard !draining else {
            return perform([.reject(.draining, detail: "datagram of \(bytes.readableBytes) bytes while shutting down")])
        }
        switch core.routeDatagram(bytes, from: source, now: now) {
        case .deliver(_, let sealed, let address): forward(sealed, to: address)
        case .actions(let actions): perform(actions)
        }
    }

    // MARK: Other relays

    /// A message on one of the relay's pub/sub channels (already on the event loop).
    func relayChannelMessage(channel: String, payload: [UInt8]) {
        if channel == RelayBus.movesChannel {
            guard let move = UserMove(encoded: String(decoding: payload, as: UTF8.self)) else {
                return perform([.reject(.badRelayDelivery, detail: "malformed move announcement")])
            }
            return perform(core.userMoved(move))
        }
        metrics.deliveriesReceived.increment()
        var buffer = ByteBufferAllocator().buffer(capacity: payload.count)
        buffer.writeBytes(payload)
        perform(core.relayDeliveryReceived(buffer))
        // Not inside a read burst: flush what the delivery wrote.
        datagramChannel?.flush()
        controlReadCompleted()
    }

    /// The relay's pub/sub subscription is (again) in place.
    func relayChannelsSubscribed() {
        core.deliveryChannelSubscribed()
    }

    func oversizedDatagram(size: Int, from source: SocketAddress) {
        perform([.reject(.datagramTooLarge, detail: "datagram of \(size) bytes from \(source)")])
    }

    // MARK: Actions

    func perform(_ actions: [RelayCore.Action]) {
        for action in actions { perform(action) }
        armInboxTimer()
    }

    private func perform(_ action: RelayCore.Action) {
        switch action {
        case .send(let id, let message):
            guard let channel = connections[id] else { return }
            guard message.kind == .receipt else { return channel.writeAndFlush(message, promise: nil) }
            counts.receiptsRouted += 1
            metrics.receiptsRouted.increment()
            if draining { lastReceiptRouted = .now() }
            // Receipts come from control reads; they are flushed together when the read ends.
            channel.write(message, promise: nil)
            if unflushedReceipts.insert(id).inserted { unflushedChannels.append(channel) }
        case .deliver(_, let bytes, let address):
            forward(bytes, to: address)
        case .reply(let bytes, let address):
            datagramChannel?.write(AddressedEnvelope(remoteAddress: address, data: bytes), promise: nil)
            flushDatagramsThisTurn()
        case .fetchVerifier(let user, let id):
            credentials.verifier(of: user, on: eventLoop).whenComplete { [self] result in
                switch result {
                case .success(let verifier): perform(core.verifierFetched(id, verifier: verifier))
                case .failure(let error):
                    redisFailed("read the credentials of \(user)", error)
                    perform(core.verifierFetchFailed(id))
                }
            }
        case .publish(let relay, let delivery):
            if unpublished.isEmpty { eventLoop.execute { [self] in publishPending() } }
            unpublished.append((relay, delivery))
        case .announceMove(let move):
            bus.announce(move, on: eventLoop).whenFailure { [self] error in redisFailed("announce move of \(move.user)", error) }
        case .checkSession(let user, let session):
            bus.session(of: user, on: eventLoop).whenComplete { [self] result in
                switch result {
                case .success(let current) where current != session:
                    logger.info("user moved to another relay", metadata: ["user": "\(user)"])
                    perform(core.sessionSuperseded(user: user, session: session))
                    updateSessionGauge()
                case .success: break
                case .failure(let error): redisFailed("check session of \(user)", error)
                }
            }
        case .register(let user, let route, let session, let id):
            registry.register(user: user, route: route, session: session, on: eventLoop).whenComplete { [self] result in
                if case .failure(let error) = result { redisFailed("register \(user)", error) }
                perform(core.registrationCompleted(id, succeeded: (try? result.get()) != nil))
                updateSessionGauge()
                if case .success = result { logger.info("user connected", metadata: ["user": "\(user)", "udp": "\(AddressText.format(route.address) ?? "?")"]) }
            }
        case .unregister(let user, let session):
            updateSessionGauge()
            logger.info("user disconnected", metadata: ["user": "\(user)"])
            guard !withdrawing else { return }
            registry.unregister(user: user, session: session, on: eventLoop).whenFailure { [self] error in
                redisFailed("unregister \(user)", error)
            }
        case .moveRoute(let user, let route, let session):
            logger.info("user's UDP address moved", metadata: ["user": "\(user)", "udp": "\(AddressText.format(route.address) ?? "?")"])
            registry.refresh([(user: user, route: route, session: session)], on: eventLoop).whenFailure { [self] error in
                redisFailed("move \(user)", error)
            }
        case .lookup(let user):
            registry.lookup(user: user, on: eventLoop).whenComplete { [self] result in
                switch result {
                case .success(let answer):
                    perform(core.lookupCompleted(user: user, route: answer.route, known: answer.known, now: .now()))
                case .failure(let error):
                    redisFailed("look up \(user)", error)
                    perform(core.lookupFailed(user: user))
                }
                datagramChannel?.flush()
                reportDatagramCounts()
            }
        case .close(let id):
            connections[id]?.close(promise: nil)
        case .storeInInbox(let user, let message):
            let entry = InboxEntry(message: message, storedAt: WallClock.millisecondsSinceEpoch())
            inboxStore.store(entry, for: user, wallNow: entry.storedAt, on: eventLoop).whenComplete { [self] result in
                if case .failure(let error) = result { redisFailed("store in \(user)'s inbox", error) }
                if case .success(.stored(false, _)) = result { counts.inboxStored += 1 }
                perform(core.inboxStoreCompleted(user: user, entry: entry, result: (try? result.get()) ?? .failed, now: .now()))
                controlReadCompleted() // receipts written outside a control read are flushed here
            }
        case .loadInbox(let user):
            inboxStore.load(user: user, on: eventLoop).whenComplete { [self] result in
                switch result {
                case .success(let entries):
                    if !entries.isEmpty { logger.info("delivering inbox", metadata: ["user": "\(user)", "entries": "\(entries.count)"]) }
                    perform(core.inboxLoaded(user: user, entries: entries, wallNow: WallClock.millisecondsSinceEpoch(), now: .now()))
                    controlReadCompleted()
                case .failure(let error):
                    redisFailed("load \(user)'s inbox", error)
                }
            }
        case .removeFromInbox(let user, let entry):
            counts.inboxRemoved += 1
            inboxStore.remove(entry, for: user, on: eventLoop).whenFailure { [self] error in
                redisFailed("remove from \(user)'s inbox", error)
            }
        case .roomRequest(let request):
            roomStore.answer(request, on: eventLoop).whenSuccess { [self] answer in
                if answer == .failed { redisFailed("room \(request.operation) \(request.room)", RedisError("failed")) }
                perform(core.roomAnswered(request, answer))
            }
        case .postToRoom(let room, let message):
            roomStore.post(message, to: room, on: eventLoop).whenSuccess { [self] result in
                if result == .failed { redisFailed("post to \(room)", RedisError("failed")) }
                perform(core.roomPosted(room: room, message: message, result: result))
                controlReadCompleted()
            }
        case .countRoomDelivery(let copy):
            roomStore.countDelivery(of: copy, to: copy.toUser, on: eventLoop).whenComplete { [self] result in
                switch result {
                case .success(let delivered): perform(core.roomDeliveryCounted(copy: copy, delivered: delivered))
                case .failure(let error): redisFailed("count delivery in \(copy.room)", error)
                }
                controlReadCompleted()
            }
        case .recordPresence(let user, let online):
            guard !withdrawing || online else { return } // a relay shutting down leaves presence to expire
            let now = WallClock.millisecondsSinceEpoch()
            presenceStore.record(user: user, online: online, now: now, on: eventLoop).whenComplete { [self] result in
                switch result {
                case .success(let roomPeers): perform(core.presenceRecorded(user: user, online: online, lastSeen: now, roomPeers: roomPeers))
                case .failure(let error): redisFailed("record presence of \(user)", error)
                }
                controlReadCompleted()
            }
        case .who(let request):
            let users: EventLoopFuture<[String]?> = request.room.map { roomStore.members(of: $0, askedBy: request.user, on: eventLoop) }
                ?? eventLoop.makeSucceededFuture(request.users)
            users.flatMap { [presenceStore, eventLoop] users -> EventLoopFuture<[PresenceEntry]?> in
                guard let users else { return eventLoop.makeSucceededFuture(nil) }
                return presenceStore.lookup(users, on: eventLoop).map { $0 }
            }.whenComplete { [self] result in
                switch result {
                case .success(let entries): perform(core.whoAnswered(request, entries))
                case .failure(let error):
                    redisFailed("who for \(request.user)", error)
                    perform([.send(request.connection, .error(.internal, "presence unavailable, try again", messageId: request.messageId))])
                }
            }
        case .reject(let reason, let detail):
            counts.rejected[reason, default: 0] += 1
            metrics.rejected(reason)
            // Failed logins are worth an operator's attention; the rest is routine noise.
            let level: Logger.Level = reason == .authFailed || reason == .loginRateLimited ? .notice : .debug
            logger.log(level: level, "rejected input", metadata: ["reason": "\(reason.rawValue)", "detail": "\(detail)"])
        }
    }

    /// Publishes the deliveries collected in this event-loop turn in one pipeline.
    private func publishPending() {
        let batch = unpublished
        unpublished.removeAll(keepingCapacity: true)
        guard !batch.isEmpty else { return }
        bus.publish(batch, on: eventLoop).whenComplete { [self] result in
            switch result {
            case .success(let listeners):
                for (entry, heard) in zip(batch, listeners) {
                    if heard == 0 {
                        perform(core.deliveryUnheard(relay: entry.relay, user: entry.delivery.user))
                    } else {
                        counts.deliveriesPublished += 1
                        metrics.deliveriesPublished.increment()
                    }
                }
            case .failure(let error):
                redisFailed("publish \(batch.count) deliveries", error)
            }
        }
    }

    /// Writes a forward; flushed once per read burst by the datagram handler (or after a lookup).
    private func forward(_ bytes: ByteBuffer, to address: SocketAddress) {
        counts.datagramsForwarded += 1
        unreportedForwarded += 1
        datagramChannel?.write(AddressedEnvelope(remoteAddress: address, data: bytes), promise: nil)
        flushDatagramsThisTurn()
    }

    /// Keeps one scheduled task at the inbox's next retransmission deadline.
    private func armInboxTimer() {
        guard let deadline = core.inboxNextDeadline else { return }
        if let armed = inboxTimerDeadline, armed <= deadline { return }
        inboxTimer?.cancel()
        inboxTimerDeadline = deadline
        inboxTimer = eventLoop.scheduleTask(deadline: deadline) { [self] in
            inboxTimer = nil
            inboxTimerDeadline = nil
            perform(core.inboxPoll(now: .now()))
        }
    }

    /// Datagrams written outside a read burst (stored messages, deliveries from other relays,
    /// lookups) go out at the end of this event-loop turn, in one flush with the rest; those
    /// written during a burst are flushed by the datagram handler when the burst ends.
    private func flushDatagramsThisTurn() {
        guard !inDatagramBurst, !datagramFlushScheduled else { return }
        datagramFlushScheduled = true
        eventLoop.execute { [self] in
            datagramFlushScheduled = false
            datagramChannel?.flush()
        }
    }

    func redisFailed(_ what: String, _ error: Error) {
        metrics.redisErrors.increment()
        logger.warning("Redis call failed", metadata: ["call": "\(what)", "error": "\(error)"])
    }

    private func updateSessionGauge() {
        metrics.sessions.record(core.connectedUsers)
    }
}
