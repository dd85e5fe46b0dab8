import NIOCore

/// When the relay's periodic work is next due: heartbeat checks, renewals of the relay's
/// liveness record (and re-writes of its registrations when needed),
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
    /// The liveness record is renewed `refreshSlices` times per `refreshInterval` (once a second
    /// by default: one command, whatever the number of sessions, and a Redis that lost the
    /// record is noticed within a second).
    static let refreshSlices = 10
    /// A re-write of every registration goes in groups (by session id) of about this many,
    /// one group per renewal, so no renewal carries all of them (with 10,000 sessions, one
    /// round of all of them held the relay's datagrams for up to 100 ms).
    static let rewriteGroupSize = 1000
    /// A re-write in progress: the group the next renewal carries, of how many.
    private(set) var rewrite: (group: Int, of: Int)?
    let sweepInterval: TimeAmount
    /// When every registration is next re-written anyway (heals writes a Redis failover lost
    /// without losing the liveness record, and keeps the registrations keys from expiring).
    private(set) var nextSweep: NIODeadline?
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
        sweepInterval = configuration.registrationSweepInterval
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

    // MARK: Liveness record renewals

    /// The relay listens at `description` (its addresses, recorded at each refresh).
    mutating func listening(at description: String) {
        self.description = description
    }

    /// Whether a refresh is due at `now` (never before the relay listens, nor after it stops).
    func isRefreshDue(now: NIODeadline) -> Bool {
        guard let nextRefresh else { return false }
        return now >= nextRefresh
    }

    /// A renewal of the liveness record goes out at `now`: the group of registrations it also
    /// re-writes, if a re-write is in progress (nil: none). The next renewal is due
    /// `refreshInterval / refreshSlices` later. A due sweep starts a re-write of every
    /// registration (`sessionCount` of them).
    mutating func refreshSent(now: NIODeadline, sessionCount: Int) -> (group: Int, of: Int)? {
        nextRefresh = now + .nanoseconds(refreshInterval.nanoseconds / Int64(Self.refreshSlices))
        let sweepDue = nextSweep.map { now >= $0 } ?? false
        if sweepDue { rewriteAll(sessionCount: sessionCount) }
        if sweepDue || nextSweep == nil { nextSweep = now + sweepInterval }
        guard let rewrite else { return nil }
        self.rewrite = rewrite.group + 1 < rewrite.of ? (rewrite.group + 1, rewrite.of) : nil
        return rewrite
    }

    /// Every registration (`sessionCount` of them) is to be written again, in groups of about
    /// `rewriteGroupSize`, one per renewal.
    mutating func rewriteAll(sessionCount: Int) {
        rewrite = (0, min(Self.refreshSlices, max(1, (sessionCount + Self.rewriteGroupSize - 1) / Self.rewriteGroupSize)))
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
        if let login = connections.nextLoginDeadline { next = min(next, login) }
        if let pause = budgets.nextPauseEnd { next = min(next, pause) }
        if let inboxDeadline = inbox.nextDeadline { next = min(next, inboxDeadline) }
        if let expiry = tokens.nextDeadline { next = min(next, expiry) }
        return next
    }

    /// Pings connections that are due, drops those whose client went silent, refreshes live
    /// registrations, retransmits stored messages, reads inboxes that waited, and ends the
    /// shutdown drain.
    public mutating func tick(now: NIODeadline, into output: inout [RelayAction]) {
        timers.heartbeatsChecked(now: now)
        checkHeartbeats(now: now, into: &output)
        closeLateLogins(now: now, into: &output)
        endExpiredTokenSessions(now: now, into: &output)
        endPauses(now: now, into: &output)
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
            let silence = connections.lastHeard(connection).map { now - $0 } ?? connections.heartbeat.deadAfter
            // Forget it now, so it is counted once however long the close takes.
            forgetConnection(connection, .silent, into: &output)
            output += [.reject(.heartbeatTimeout, detail: "\(connection) silent for \(silence)"), .close(connection)]
        }
    }

    /// Closes the connections that have not logged in by their deadline (idle ones, and ones
    /// that sent half a frame or a login they never finished).
    private mutating func closeLateLogins(now: NIODeadline, into output: inout [RelayAction]) {
        for connection in connections.pollLoginDeadlines(now: now) {
            connectionClosed(connection, into: &output)
            let timeout = configuration.limits.loginTimeout
            output += [.reject(.loginTimeout, detail: "\(connection) not logged in within \(timeout)"), .close(connection)]
        }
    }

    /// Renews this relay's liveness record, which vouches for all its registrations: one
    /// request whatever the number of sessions. While a re-write of the registrations is in
    /// progress (the store lost the record, or the periodic sweep), the request also carries
    /// the next group of them.
    mutating func refresh(now: NIODeadline, into output: inout [RelayAction]) {
        var registrations: [Registration] = []
        if let group = timers.refreshSent(now: now, sessionCount: sessions.count) {
            registrations = sessions.registrations(inSlice: group.group, of: group.of)
        }
        output.append(.store(.refresh(relayId: configuration.relayId, description: timers.description, registrations)))
    }

    /// The store answered a renewal: if it had lost the liveness record (Redis restarted or
    /// was flushed, or the record expired while Redis was unreachable), a new incarnation has
    /// begun, and every registration is written again with it.
    mutating func refreshed(relayRecordWasMissing: Bool) {
        if relayRecordWasMissing { timers.rewriteAll(sessionCount: sessions.count) }
    }

    // MARK: Shutdown

    /// A graceful shutdown begins: datagrams arriving from now on are dropped (their senders
    /// retransmit elsewhere), receipts for those already forwarded are still routed. `.drained`
    /// comes when no client is left (at once if none is), no receipt came for the quiet period,
    /// or the drain timeout passed (from `tick`).
    public mutating func beginDrain(now: NIODeadline, into output: inout [RelayAction]) {
        timers.beginDrain(until: now + configuration.drainTimeout, now: now)
        if timers.finishDrain(now: now, connectionsLeft: connections.count) { output.append(.drained) }
    }

    /// The relay stops: every session ends without a word to the store one by one (each
    /// connected one reported ended); their registrations are withdrawn in one request, and
    /// every connection closes.
    public mutating func shutDown(now: NIODeadline, into output: inout [RelayAction]) {
        timers.stopRefreshing()
        let registrations = sessions.registrations // every session is on a connection: each ends below
        for connection in connections.ids.sorted(by: { $0.rawValue < $1.rawValue }) {
            let phase = connections.phase(of: connection)
            if connections.change(connection, .closing, now: now) != nil, let phase, let session = phase.session {
                endSession(session, wasConnected: phase.isConnected, .relayStopped, withdraw: false, into: &output)
            }
            output.append(.close(connection))
        }
        output.append(.store(.withdraw(relayId: configuration.relayId, registrations)))
    }
}
