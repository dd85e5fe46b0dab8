import NIOCore

/// Logging in with an access token (docs/PROTOCOL.md §4.9): a CONNECT carrying `token` instead
/// of AUTH/CHALLENGE. It counts against the address's login rate like AUTH, a refused token
/// counts as a failed login for the backoff, and the store is asked (with the verifier read)
/// for the user's lock and the operator's `deny-tokens` time before the session starts.
extension RelayLogin {
    /// CONNECT with `token`, from `peer`; `policy` is nil on a relay that takes no tokens;
    /// `wallMillis` is the wall clock now (ms since the epoch).
    public mutating func tokenConnect(
        _ connect: SIMPMessage, policy: AccessTokenPolicy?, on connection: ConnectionID, peer: SocketAddress, host: String, now: NIODeadline,
        wallMillis: Int64
    ) -> Step {
        guard progress[connection] == nil else { return .actions(Self.alreadyLoggingIn(connection)) }
        guard let policy else {
            return .actions([
                .reject(.tokenNotAccepted, detail: "token login on \(connection): this relay takes no tokens"),
                .send(connection, .error(.tokenNotAccepted, "this relay takes no access tokens: log in with a password")),
            ])
        }
        guard !policy.loopbackOnly || AccessTokenPolicy.isLoopback(host) else {
            return .actions([
                .reject(.tokenNotAccepted, detail: "token login from \(host) on \(connection) over plain TCP"),
                .send(
                    connection,
                    .error(.tokenNotAccepted, "this relay takes access tokens only over TLS: connect with --tls (a token in clear could be stolen)")),
                .close(connection),
            ])
        }
        if let refused = rateLimited(connection, host: host, now: now) { return .actions(refused) }
        guard !connect.fromUser.isEmpty, connect.udpPort > 0, connect.udpPort <= 65535 else {
            return .actions([
                .reject(.missingField, detail: "token CONNECT without user or UDP port on \(connection)"),
                .send(connection, .error(.badRequest, "CONNECT needs fromUser and udpPort (1-65535)")),
            ])
        }
        let user = connect.fromUser
        if let wait = failures.wait(user, from: host, now: now) { return .actions(Self.backOff(user, from: host, wait, on: connection)) }
        switch policy.judge(connect.token, for: user, nowMillis: wallMillis) {
        case .failure(let refusal):
            return failed(
                user, on: connection, host: host, now: now, shared: .none, why: "access token: \(refusal.reason)", answer: refusal.text,
                code: refusal.code, reason: .tokenRefused)
        case .success(let claims):
            var kept = connect
            kept.token = "" // never kept, never logged
            progress[connection] = .tokenChecked(user: user, claims: claims, connect: kept, peer: peer, host: host)
            return .fetchVerifier(user: user)
        }
    }

    /// Whether `connection`'s login is a token login waiting for the store.
    public func awaitsTokenUser(on connection: ConnectionID) -> Bool {
        if case .tokenChecked = progress[connection] { return true }
        return false
    }

    /// The store answered a token login's question: a `locked` user is refused, a token issued
    /// before the user's `deniedBefore` too; a name that must wait after failed logins (by the
    /// counts every relay shares) is refused as by this relay's own. Otherwise the session
    /// starts with a random secret handed to the client in CONNECTED (the channel is TLS or
    /// loopback, or the operator allowed it).
    public mutating func tokenUserFetched(
        locked: Bool, deniedBefore: Int64?, shared: SharedLoginFailures, policy: AccessTokenPolicy?, on connection: ConnectionID,
        now: NIODeadline, wallMillis: Int64, entropy: inout Entropy
    ) -> Step {
        guard case .tokenChecked(let user, let claims, let connect, let peer, let host) = progress.removeValue(forKey: connection), let policy
        else { return .actions([]) }
        if let wait = failures.wait(user, from: host, now: now, shared: shared) {
            return .actions(Self.backOff(user, from: host, wait, on: connection))
        }
        if let refusal = policy.check(claims, for: user, nowMillis: wallMillis, deniedBefore: deniedBefore) {
            return failed(
                user, on: connection, host: host, now: now, shared: shared, why: "access token: \(refusal.reason)", answer: refusal.text,
                code: refusal.code, reason: .tokenRefused)
        }
        guard !locked else {
            return failed(user, on: connection, host: host, now: now, shared: shared, why: "the user is locked", answer: Self.lockedText)
        }
        failures.succeeded(user, from: host, now: now)
        let secret = entropy.bytes(32)
        var connected = SIMPMessage(kind: .connected)
        connected.sessionSecret = secret
        let expires = claims.expires ?? wallMillis
        connected.tokenExpires = expires
        return .acceptedToken(user: user, secret: secret, connected: connected, connect: connect, peer: peer, expires: expires)
    }

    /// What the store records of a successful token login (tokens are checked whether or not
    /// passwords are).
    func tokenSuccess(_ user: String, from host: String) -> LoginOutcome {
        LoginOutcome(user: user, host: host, succeeded: true, byName: false, policy: failures.policy)
    }
}
