import NIOCore

/// When the relay's periodic work is next due: heartbeat checks, registration refreshes,
/// inbox reads that wait (for a session's first datagram, or after a failure) and the
/// shutdown drain. The inbox's retransmissions keep their own
/// deadlines in `InboxCore`.
public struct RelayTimers: Sendable {
    /// A graceful shutdown's drain: it ends at `deadline`, or once no receipt has been routed
    /// for the quiet period.
    struct Drain: Sendable {
        var deadline: NIODeadline
        var lastReceipt: NIODeadline
        var finished = false
    }

    /// How often heartbeats are checked at the latest: a few times per interval. Each
    /// connection's ping or silence deadline also ends the wait by itself
    /// (`ConnectionTable.nextHeartbeatDeadline`), so pings go at their own times and not in a
    /// group per check: with 10,000 clients at the default 5 s interval, checking once a second
    /// wrote 2,000 PINGs in one loop iteration and held every datagram behind them for tens of
    /// milliseconds.
    let heartbeatCheckPeriod: TimeAmount
    let refreshInterval: TimeAmount
    /// Registrations are refreshed in this many groups (by session id), one group every
    /// `refreshInterval / refreshSlices`, so each is refreshed once per `refreshInterval`
    /// without all of them going to the store at one moment.
    static let refreshSlices = 10
    /// The group the next refresh covers.
    private(set) var nextRefreshSlice = 0
    let drainQuietPeriod: TimeAmount
    private(set) var nextHeartbeatCheck: NIODeadline
    /// Nil until the relay listens (`RelayCore.listening`), and again once it shuts down.
    private(set) var nextRefresh: NIODeadline?
    /// The relay's addresses, as recorded in the store at each refresh.
    private(set) var description = ""
    private var drain: Drain?
    /// An inbox read that waits for the device's first datagram, at the latest until `deadline`.
    struct InboxLoad: Sendable {
        var deadline: NIODeadline
        /// When the device's CONNECTED went out, if that is why the read waits: the device's
        /// HELLO, its first datagram after it, then measures a round trip.
        var connectedAt: NIODeadline?
    }

    /// Receiving devices whose inbox read waits.
    private(set) var inboxLoads: [Recipient: InboxLoad] = [:]
    /// The messageId of the next PING.
    private(set) var nextPingId: UInt64 = 1

    init(configuration: RelayCore.Configuration, now: NIODeadline) {
        let interval = configuration.heartbeat.interval.nanoseconds
        heartbeatCheckPeriod = .nanoseconds(max(20_000_000, min(1_000_000_000, interval / 4)))
        refreshInterval = configuration.refreshInterval
        drainQuietPeriod = configuration.drainQuietPeriod
        nextHeartbeatCheck = now + heartbeatCheckPeriod
    }

    /// The earliest of the deadlines kept here.
    var nextDeadline: NIODeadline {
        var next = nextHeartbeatCheck
        if let nextRefresh { next = min(next, nextRefresh) }
        if let drain, !drain.finished { next = min(next, drain.deadline, drain.lastReceipt + drainQuietPeriod) }
        if let load = inboxLoads.values.lazy.map(\.deadline).min() { next = min(next, load) }
        return next
    }

    // MARK: Heartbeats

    /// Heartbeats are checked at `now`: if the periodic check was due, the next one is a
    /// period from now.
    mutating func heartbeatsChecked(now: NIODeadline) {
        if now >= nextHeartbeatCheck { nextHeartbeatCheck = now + heartbeatCheckPeriod }
    }

    /// A PING goes out: its messageId (each PING has the next one).
    mutating func takePingId() -> UInt64 {
        defer { nextPingId += 1 }
        return nextPingId
    }

    // MARK: Registration refreshes

    /// The relay listens at `description` (its addresses, recorded at each refresh).
    mutating func listening(at description: String) {
        self.description = description
    }

    /// Whether a refresh is due at `now` (never before the relay listens, nor after it stops).
    func isRefreshDue(now: NIODeadline) -> Bool {
        guard let nextRefresh else { return false }
        return now >= nextRefresh
    }

    /// A refresh goes out at `now`: the group of registrations it covers. The next group is due
    /// `refreshInterval / refreshSlices` later.
    mutating func refreshSent(now: NIODeadline) -> Int {
        let slices = Self.refreshSlices
        nextRefresh = now + .nanoseconds(refreshInterval.nanoseconds / Int64(slices))
        defer { nextRefreshSlice = (nextRefreshSlice + 1) % slices }
        return nextRefreshSlice
    }

    /// The relay stops: no more refreshes.
    mutating func stopRefreshing() {
        nextRefresh = nil
    }

    // MARK: Inbox reads

    /// Whether any inbox read waits (the datagram path checks this first).
    var awaitsInboxLoads: Bool { !inboxLoads.isEmpty }

    /// `device`'s inbox is read at `deadline`, or earlier (`takeInboxLoad`); `connectedAt`:
    /// when its CONNECTED went out, if that is why.
    mutating func loadInbox(of device: Recipient, at deadline: NIODeadline, connectedAt: NIODeadline? = nil) {
        inboxLoads[device] = InboxLoad(deadline: deadline, connectedAt: connectedAt)
    }

    /// `device`'s inbox read, if it waited; it no longer does.
    mutating func takeInboxLoad(of device: Recipient) -> InboxLoad? {
        guard !inboxLoads.isEmpty else { return nil }
        return inboxLoads.removeValue(forKey: device)
    }

    /// The devices whose inbox read is due.
    mutating func dueInboxLoads(now: NIODeadline) -> [Recipient] {
        let due = inboxLoads.filter { $0.value.deadline <= now }.keys.sorted { ($0.user, $0.device) < ($1.user, $1.device) }
        for user in due { inboxLoads[user] = nil }
        return due
    }

    // MARK: Drain

    /// Whether a graceful shutdown has begun.
    var isDraining: Bool { drain != nil }

    /// A graceful shutdown begins at `now` and lasts until `deadline` at the latest (unless one
    /// already had).
    mutating func beginDrain(until deadline: NIODeadline, now: NIODeadline) {
        guard drain == nil else { return }
        drain = Drain(deadline: deadline, lastReceipt: now)
    }

    /// A receipt was routed: a drain waits a quiet period from now.
    mutating func receiptRouted(now: NIODeadline) {
        drain?.lastReceipt = now
    }

    /// Whether the drain ends now (once): `connectionsLeft` is none, its deadline passed, or no
    /// receipt came for the quiet period.
    mutating func finishDrain(now: NIODeadline, connectionsLeft: Int) -> Bool {
        guard let drain, !drain.finished,
            connectionsLeft == 0 || now >= drain.deadline || now - drain.lastReceipt >= drainQuietPeriod
        else { return false }
        self.drain?.finished = true
        return true
    }
}

/// Time-driven decisions: the shell calls `tick` at `nextDeadline` (or any time).
extension RelayCore {
    /// When `tick` next has work.
    public var nextDeadline: NIODeadline {
        var next = timers.nextDeadline
        if let heartbeat = connections.nextHeartbeatDeadline { next = min(next, heartbeat) }
        if let inboxDeadline = inbox.nextDeadline { next = min(next, inboxDeadline) }
        return next
    }

    /// Pings connections that are due, drops those whose client went silent, refreshes live
    /// registrations, retransmits stored messages, reads inboxes that waited, and ends the
    /// shutdown drain.
    public mutating func tick(now: NIODeadline, into output: inout [RelayAction]) {
        timers.heartbeatsChecked(now: now)
        checkHeartbeats(now: now, into: &output)
        if timers.isRefreshDue(now: now) { refresh(now: now, into: &output) }
        if let deadline = inbox.nextDeadline, deadline <= now { inboxActions(inbox.poll(now: now), into: &output) }
        for device in timers.dueInboxLoads(now: now) where sessions.receivingSession(of: device.user, device: device.device) != nil {
            output.append(.store(.loadInbox(user: device.user, device: device.device)))
        }
        if timers.finishDrain(now: now, connectionsLeft: connections.count) { output.append(.drained) }
    }

    private mutating func checkHeartbeats(now: NIODeadline, into output: inout [RelayAction]) {
        let due = connections.pollHeartbeats(now: now)
        for connection in due.ping {
            output.append(.send(connection, SIMPMessage(kind: .ping, messageId: timers.takePingId())))
        }
        for connection in due.dead {
            // Forget it now, so it is counted once however long the close takes.
            connectionClosed(connection, into: &output)
            output += [.reject(.heartbeatTimeout, detail: "\(connection) silent for \(connections.heartbeat.deadAfter)"), .close(connection)]
        }
    }

    /// Keeps this relay's own liveness record and the next group of its registrations
    /// (`RelayTimers.refreshSlices`) alive in the store.
    mutating func refresh(now: NIODeadline, into output: inout [RelayAction]) {
        let slice = timers.refreshSent(now: now)
        let registrations = sessions.registrations(inSlice: slice, of: RelayTimers.refreshSlices)
        output.append(.store(.refresh(relayId: configuration.relayId, description: timers.description, registrations)))
    }

    // MARK: Shutdown

    /// A graceful shutdown begins: datagrams arriving from now on are dropped (their senders
    /// retransmit elsewhere), receipts for those already forwarded are still routed. `tick`
    /// says `.drained` when no client is left, no receipt came for the quiet period, or the
    /// drain timeout passed.
    public mutating func beginDrain(now: NIODeadline) {
        timers.beginDrain(until: now + configuration.drainTimeout, now: now)
    }

    /// The relay stops: every session ends without a word to the store one by one; their
    /// registrations are withdrawn in one request, and every connection closes.
    public mutating func shutDown(into output: inout [RelayAction]) {
        let registrations = sessions.endAll()
        timers.stopRefreshing()
        for connection in connections.ids.sorted(by: { $0.rawValue < $1.rawValue }) {
            connections.setPhase(.awaitingLogin, of: connection)
            output.append(.close(connection))
        }
        output.append(.store(.withdraw(relayId: configuration.relayId, registrations)))
    }
}
