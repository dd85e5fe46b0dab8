import NIOCore

/// Access tokens (docs/PROTOCOL.md §4.9): a CONNECT with `token` logs in; TOKEN_REFRESH gives a
/// session a new token on the same connection; a session whose token runs out without one ends
/// with ERROR TOKEN_SESSION_EXPIRED.
extension RelayCore {
    /// The shell read the wall clock: `wallMillis` (ms since the epoch) at `now`. Tokens' times
    /// are wall-clock times; the core reads them through this anchor.
    public mutating func anchorWallClock(_ wallMillis: Int64, at now: NIODeadline) {
        tokens.anchor(wallMillis: wallMillis, at: now)
    }

    /// The operator's key set was (re)loaded: tokens are checked with `verifier` from now on.
    /// Sessions keep running until their tokens expire.
    public mutating func replaceTokenVerifier(_ verifier: any AccessTokenVerifier) {
        tokens.policy?.verifier = verifier
    }

    /// When `connection`'s session token expires (ms since the epoch), nil without a token.
    public func tokenExpiry(of connection: ConnectionID) -> Int64? { tokens.expiry(of: connection) }

    /// CONNECT with a token on a connection awaiting login.
    mutating func tokenConnect(
        _ connect: SIMPMessage, on connection: ConnectionID, peer: SocketAddress, now: NIODeadline, into output: inout [RelayAction]
    ) {
        let host = connections.host(of: connection) ?? "unknown"
        let step = login.tokenConnect(
            connect, policy: tokens.policy, on: connection, peer: peer, host: host, now: now, wallMillis: tokens.wallMillis(at: now))
        tokenLoginStep(step, on: connection, now: now, into: &output)
    }

    /// The store answered the question of a token login or refresh on `connection`; false if
    /// no token login or refresh waited there (a password login's answer).
    mutating func tokenUserFetched(
        on connection: ConnectionID, locked: Bool, deniedBefore: Int64?, shared: SharedLoginFailures, now: NIODeadline,
        into output: inout [RelayAction]
    ) -> Bool {
        if let refresh = tokens.takeRefresh(on: connection) {
            refreshChecked(refresh, on: connection, locked: locked, deniedBefore: deniedBefore, now: now, into: &output)
            return true
        }
        guard login.awaitsTokenUser(on: connection) else { return false }
        let step = login.tokenUserFetched(
            locked: locked, deniedBefore: deniedBefore, shared: shared, policy: tokens.policy, on: connection, now: now,
            wallMillis: tokens.wallMillis(at: now), entropy: &entropy)
        tokenLoginStep(step, on: connection, now: now, into: &output)
        return true
    }

    /// The store could not answer a token refresh on `connection`; false if none waited.
    mutating func tokenRefreshFailed(on connection: ConnectionID, _ failure: StoreFailure, into output: inout [RelayAction]) -> Bool {
        guard let refresh = tokens.takeRefresh(on: connection) else { return false }
        output += [
            .reject(.registryUnavailable, detail: "token refresh of \(refresh.user) on \(connection): \(failure)"),
            .send(connection, .error(.internal, "registry unavailable, send the token again", messageId: refresh.messageId)),
        ]
        return true
    }

    private mutating func tokenLoginStep(_ step: RelayLogin.Step, on connection: ConnectionID, now: NIODeadline, into output: inout [RelayAction]) {
        switch step {
        case .actions(let actions):
            output += actions
        case .fetchVerifier(let user):
            output.append(.store(.fetchVerifier(user: user, connection: connection, host: connections.host(of: connection) ?? "unknown")))
        case .accepted:
            break // a token login is accepted only once the store answered
        case .acceptedToken(let user, let secret, let connected, let connect, let peer, let expires):
            tokenAccepted(
                user, secret: secret, connected: connected, connect: connect, peer: peer, expires: expires, on: connection, now: now, into: &output)
        }
    }

    /// Starts the session of an accepted token login; it ends at `expires` unless renewed.
    mutating func tokenAccepted(
        _ user: String, secret: [UInt8], connected: SIMPMessage, connect: SIMPMessage, peer: SocketAddress, expires: Int64,
        on connection: ConnectionID, now: NIODeadline, into output: inout [RelayAction]
    ) {
        output.append(.store(.recordLogin(login.tokenSuccess(user, from: connections.host(of: connection) ?? "unknown"))))
        loginStep(.accepted(user: user, secret: secret, connected: connected), on: connection, peer: peer, connect: connect, now: now, into: &output)
        if connections.session(on: connection) != nil { tokens.expires(connection, at: expires, now: now) }
    }

    /// TOKEN_REFRESH on `user`'s connected session: a right token for the same user is checked
    /// against the store (lock, `deny-tokens`) and then replaces the session's expiry; a wrong
    /// one is answered with its ERROR and the session runs on until its token expires.
    mutating func tokenRefresh(
        _ message: SIMPMessage, from user: String, on connection: ConnectionID, now: NIODeadline, into output: inout [RelayAction]
    ) {
        func refuse(_ code: SIMPMessage.ErrorCode, _ text: String, reason: RejectReason, _ detail: String) {
            output += [
                .reject(reason, detail: "token refresh of \(user) on \(connection): \(detail)"),
                .send(connection, .error(code, text, messageId: message.messageId)),
            ]
        }
        guard let policy = tokens.policy, tokens.expiry(of: connection) != nil else {
            return refuse(.tokenNotAccepted, "this session did not log in with an access token", reason: .tokenNotAccepted, "no token session")
        }
        guard !tokens.isRefreshing(connection) else {
            return refuse(.tokenRefused, "a token refresh is already under way on this connection", reason: .tokenRefused, "refresh under way")
        }
        switch policy.judge(message.token, for: user, nowMillis: tokens.wallMillis(at: now)) {
        case .failure(let refusal):
            refuse(refusal.code, refusal.text, reason: .tokenRefused, refusal.reason)
        case .success(let claims):
            tokens.refreshWaits(.init(user: user, claims: claims, messageId: message.messageId), on: connection)
            output.append(.store(.fetchVerifier(user: user, connection: connection, host: connections.host(of: connection) ?? "unknown")))
        }
    }

    private mutating func refreshChecked(
        _ refresh: TokenSessions.PendingRefresh, on connection: ConnectionID, locked: Bool, deniedBefore: Int64?, now: NIODeadline,
        into output: inout [RelayAction]
    ) {
        guard let policy = tokens.policy, connections.session(on: connection) != nil else { return }
        let wall = tokens.wallMillis(at: now)
        var refusal = policy.check(refresh.claims, for: refresh.user, nowMillis: wall, deniedBefore: deniedBefore)
        if refusal == nil, locked {
            refusal = .init(code: .tokenRefused, text: RelayLogin.lockedText, reason: "the user is locked")
        }
        if let refusal {
            output += [
                .reject(.tokenRefused, detail: "token refresh of \(refresh.user) on \(connection): \(refusal.reason)"),
                .send(connection, .error(refusal.code, refusal.text, messageId: refresh.messageId)),
            ]
            return
        }
        let expires = refresh.claims.expires ?? wall
        tokens.expires(connection, at: expires, now: now)
        var answer = SIMPMessage(kind: .tokenRefresh, messageId: refresh.messageId, toUser: refresh.user)
        answer.tokenExpires = expires
        output.append(.send(connection, answer))
    }

    /// Ends the sessions whose token ran out (with the leeway) and was not renewed.
    mutating func endExpiredTokenSessions(now: NIODeadline, into output: inout [RelayAction]) {
        for (connection, expires) in tokens.poll(now: now) {
            guard case .connected(let user, _) = connections.phase(of: connection) else { continue }
            let ago = AccessTokenPolicy.ago(tokens.wallMillis(at: now) - expires)
            forgetConnection(connection, .tokenExpired, into: &output)
            output += [
                .reject(.tokenSessionExpired, detail: "\(connection): \(user)'s access token expired \(ago) ago without a new one"),
                .send(
                    connection,
                    .error(
                        .tokenSessionExpired,
                        "your access token expired \(ago) ago and no new one came: the session ended; log in again with a new token")),
                .close(connection),
            ]
        }
    }
}
