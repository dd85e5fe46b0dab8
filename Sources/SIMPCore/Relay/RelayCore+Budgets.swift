import NIOCore

/// Control requests within their budgets (`RelayLimits`, docs/OPERATIONS.md §10): each kind is
/// charged to its connection and its user; a connection with many requests waiting for the
/// store is no longer read (the shell stops reading it: TCP backpressure) until answers come
/// back, so one client cannot fill the relay's Redis pipeline. Over a budget the client is
/// told ERROR RATE_LIMITED with the refused requests' ids and when to try again (one ERROR per
/// pause, `refuseRequest`); nobody else is affected.
extension RelayCore {
    /// Charges control request `message` of connected `user` on `connection`; false (with the
    /// refusal appended to `output`) when it is over a budget and must not be carried out.
    mutating func admitRequest(
        _ message: SIMPMessage, from user: String, on connection: ConnectionID, now: NIODeadline, into output: inout [RelayAction]
    ) -> Bool {
        guard let kind = ControlRequestKind(message.kind) else { return true }
        if budgets.isFull(connection) {
            let waiting = budgets.waiting(on: connection)
            let refusal = RequestBudgets.Refusal(retryAfter: .milliseconds(100), whose: "\(waiting) requests waiting")
            refuseRequest(message, kind: kind, user: user, on: connection, refusal, now: now, into: &output)
            return false
        }
        var refusal = budgets.spend(kind, user: user, on: connection, now: now)
        if refusal == nil, kind == .keyFetch, !message.toUser.isEmpty {
            refusal = budgets.claimPrekeys(of: message.toUser, by: user, now: now)
        }
        guard let refusal else { return true }
        refuseRequest(message, kind: kind, user: user, on: connection, refusal, now: now, into: &output)
        return false
    }

    /// A login of `user` is accepted: false (with the refusal appended and the connection
    /// closed) when the user logs in more often than its budget.
    mutating func admitLogin(_ user: String, on connection: ConnectionID, now: NIODeadline, into output: inout [RelayAction]) -> Bool {
        guard let refusal = budgets.spend(.login, user: user, on: nil, now: now) else { return true }
        output += [
            .reject(.requestRateLimited, detail: "login of \(user) on \(connection): over \(user)'s login budget"),
            .send(connection, .loginRateLimited("too many logins as \(user)", retryAfter: refusal.retryAfter)),
            .close(connection),
        ]
        return false
    }

    /// Refuses a request over a budget: its connection is not read for 50 ms, twice as long
    /// each time it is refused again soon after (up to 2 s), so a flood costs the relay one read
    /// per pause. The client is told when the pause ends, in one ERROR RATE_LIMITED for every
    /// request refused during it (those read with the first included): `messageId` and
    /// `receiptIds` name them, `retryAfterMillis` says when all may be sent again. So a client
    /// that sent several requests at once has each of them back, and a flood gets one small
    /// answer per pause, not one per frame.
    private mutating func refuseRequest(
        _ message: SIMPMessage, kind: ControlRequestKind, user: String, on connection: ConnectionID, _ refusal: RequestBudgets.Refusal,
        now: NIODeadline, into output: inout [RelayAction]
    ) {
        let (startsPause, stopReading) = budgets.refused(message.messageId, kind: kind, user: user, refusal, on: connection, now: now)
        let detail =
            startsPause
            ? "\(message.kind) from \(user) on \(connection): \(refusal.whose) over the \(kind.rawValue) budget"
            : "\(message.kind) \(message.messageId) on \(connection), paused: told when the pause ends"
        output.append(.reject(.requestRateLimited, detail: detail))
        if stopReading { output.append(.pauseReading(connection)) }
    }

    /// Connections whose pause after a refusal is over are told what it refused, and read again.
    mutating func endPauses(now: NIODeadline, into output: inout [RelayAction]) {
        for ended in budgets.pausesEnded(now: now) {
            if let owed = ended.owed { output.append(.send(ended.connection, Self.refusalError(owed, now: now))) }
            if ended.resume { output.append(.resumeReading(ended.connection)) }
        }
    }

    /// The ERROR RATE_LIMITED telling `owed`'s requests, sent at `now`.
    static func refusalError(_ owed: RequestBudgets.OwedRefusal, now: NIODeadline) -> SIMPMessage {
        let retryAfter = max(owed.retryAt - now, .milliseconds(1))
        var text = "too many \(owed.kind.rawValue) requests (\(owed.whose)), retry in \(RetryDelay.text(retryAfter))"
        if owed.count > 1 { text += "; \(owed.count) requests refused" }
        var error = SIMPMessage.rateLimited(text, retryAfter: retryAfter, messageId: owed.ids[0], to: owed.user)
        error.receiptIds = Array(owed.ids.dropFirst())
        return error
    }

    /// Counts the store requests that `output` gained from `start` on for `connection` (those
    /// of its control requests); when the connection reaches its bound, the shell is told to
    /// stop reading it.
    mutating func countWaiting(on connection: ConnectionID, in output: inout [RelayAction], from start: Int) {
        var pause = false
        for case .store(let request) in output[start...] where request.controlConnection == connection {
            pause = budgets.sent(on: connection) || pause
        }
        if pause { output.append(.pauseReading(connection)) }
    }

    /// The store answered (or failed) a request of a control connection's: the shell may read
    /// the connection again if it had stopped.
    mutating func requestSettled(on connection: ConnectionID?, into output: inout [RelayAction]) {
        guard let connection, budgets.answered(on: connection) else { return }
        output.append(.resumeReading(connection))
    }
}

extension StoreRequest {
    /// The control connection whose request this is, if it answers one (a key fetch or
    /// publish, a room or presence request): bounded per connection while it waits.
    var controlConnection: ConnectionID? {
        switch self {
        case .publishKeys(let request): return request.connection
        case .fetchKeys(let request): return request.connection
        case .room(let request): return request.connection
        case .who(let request): return request.connection
        default: return nil
        }
    }
}

extension StoreAnswer {
    /// The control connection whose request this answers (`StoreRequest.controlConnection`).
    var controlConnection: ConnectionID? {
        switch self {
        case .publishKeys(let request, _, _, _): return request.connection
        case .fetchKeys(let request, _, _, _, _): return request.connection
        case .room(let request, _): return request.connection
        case .who(let request, _): return request.connection
        case .limitReached(let request, _): return request.controlConnection
        default: return nil
        }
    }
}
