import NIOCore

/// Login (docs/PROTOCOL.md §3): AUTH → CHALLENGE → CONNECT with proof → CONNECTED with the
/// relay's signature and the session id, one connection at a time. A relay that does not
/// require login answers AUTH with iterations 0 and accepts CONNECT without proof, handing out
/// the session secret in clear.
///
/// It owns the logins under way, the per-address login rate and the backoff after failed
/// logins (`FailedLogins`); `RelayCore` starts the session once a login is accepted.
public struct RelayLogin: Sendable {
    /// What the core must do next for a connection's login.
    public enum Step: Equatable, Sendable {
        /// Carry out these actions (answers, rejections, a close); no session starts.
        case actions([RelayAction])
        /// Ask the store for `user`'s verifier, then call `verifierFetched`.
        case fetchVerifier(user: String)
        /// The login is accepted: start `user`'s session with `secret`; `connected` is the
        /// CONNECTED to send once the store has the registration (the core fills in the rest).
        case accepted(user: String, secret: [UInt8], connected: SIMPMessage)
        /// A login with an access token is accepted (its CONNECT came before the store's
        /// answer): as `accepted`, for `connect` from `peer`; the session ends at `expires`
        /// (ms since the epoch) unless a new token comes.
        case acceptedToken(user: String, secret: [UInt8], connected: SIMPMessage, connect: SIMPMessage, peer: SocketAddress, expires: Int64)
    }

    enum Progress: Sendable {
        case fetchingVerifier(user: String, clientNonce: [UInt8], host: String)
        /// CHALLENGE sent; `verifier` is nil on a relay that does not authenticate; a `locked`
        /// user's login fails whatever the proof; `shared`: the failed-login counts all relays
        /// share, read with the verifier.
        case challenged(LoginTranscript, verifier: PasswordVerifier?, locked: Bool, shared: SharedLoginFailures)
        /// A CONNECT's access token is signed right and its claims fit; the store is asked for
        /// the user's lock, the operator's `deny-tokens` time and the shared failure counts.
        case tokenChecked(user: String, claims: AccessTokenClaims, connect: SIMPMessage, peer: SocketAddress, host: String)
    }

    /// Whether users must log in with a password.
    public let requireLogin: Bool
    /// Keys the decoy challenges for users that do not exist (stable per secret).
    private let decoySecret: [UInt8]
    var rates: RateLimiter<String>
    var failures: FailedLogins
    var progress: [ConnectionID: Progress] = [:]

    public init(requireLogin: Bool, decoySecret: [UInt8], limit: RateLimit, backoff: FailedLogins.Policy = .init()) {
        self.requireLogin = requireLogin
        self.decoySecret = decoySecret
        self.rates = RateLimiter(limit)
        self.failures = FailedLogins(backoff)
    }

    /// The connection closed (or its login ended): its login is forgotten.
    public mutating func forget(_ connection: ConnectionID) {
        progress[connection] = nil
    }

    /// AUTH on a connection without a session.
    public mutating func auth(_ auth: SIMPMessage, on connection: ConnectionID, host: String, now: NIODeadline, entropy: inout Entropy) -> Step {
        guard progress[connection] == nil else { return .actions(Self.alreadyLoggingIn(connection)) }
        if let refused = rateLimited(connection, host: host, now: now) { return .actions(refused) }
        guard !auth.fromUser.isEmpty, (16...64).contains(auth.nonce.count) else {
            return .actions([
                .reject(.missingField, detail: "AUTH without user or with a bad nonce on \(connection)"),
                .send(connection, .error(.badRequest, "AUTH needs fromUser and a nonce of 16-64 bytes")),
            ])
        }
        guard requireLogin else {
            return challenge(
                auth.fromUser, clientNonce: auth.nonce, verifier: nil, locked: false, shared: .none, on: connection, entropy: &entropy)
        }
        if let wait = failures.wait(auth.fromUser, from: host, now: now) {
            return .actions(Self.backOff(auth.fromUser, from: host, wait, on: connection))
        }
        progress[connection] = .fetchingVerifier(user: auth.fromUser, clientNonce: auth.nonce, host: host)
        return .fetchVerifier(user: auth.fromUser)
    }

    /// The refusal of a login as `user` from `host` that must wait after failed logins.
    static func backOff(_ user: String, from host: String, _ wait: FailedLogins.Wait, on connection: ConnectionID) -> [RelayAction] {
        let whence = wait.byName ? "from addresses it has not logged in from" : "from \(host)"
        return [
            .reject(.loginRateLimited, detail: "\(connection): \"\(user)\" backs off after failed logins \(whence)"),
            .send(connection, .loginRateLimited("too many failed logins as \(user) \(whence)", retryAfter: wait.time)),
            .close(connection),
        ]
    }

    /// The store answered `.fetchVerifier`: nil means no such user, which gets a decoy
    /// challenge that no password answers, so the reply does not tell whether the user exists:
    /// its salt and iteration count are derived from the decoy secret (shared by every relay of
    /// the store) and the name, the count weighted by real users' `iterationCounts`. A `locked`
    /// user is challenged as usual; its CONNECT fails. A name that must wait by the failed-login
    /// counts all relays share (`shared`) is refused as by this relay's own.
    public mutating func verifierFetched(
        _ verifier: PasswordVerifier?, locked: Bool = false, iterationCounts: [UInt32: Int] = [:], shared: SharedLoginFailures = .none,
        on connection: ConnectionID, now: NIODeadline? = nil, entropy: inout Entropy
    ) -> Step {
        guard case .fetchingVerifier(let user, let clientNonce, let host) = progress[connection] else { return .actions([]) }
        // (a token login's answer goes to `tokenUserFetched`)
        if let now, let wait = failures.wait(user, from: host, now: now, shared: shared) {
            progress[connection] = nil
            return .actions(Self.backOff(user, from: host, wait, on: connection))
        }
        let verifier =
            verifier
            ?? LoginVerification.decoy(
                for: user, secret: decoySecret,
                iterations: LoginVerification.decoyIterations(for: user, secret: decoySecret, counts: iterationCounts))
        return challenge(user, clientNonce: clientNonce, verifier: verifier, locked: locked, shared: shared, on: connection, entropy: &entropy)
    }

    /// The store could not be asked for a verifier.
    public mutating func verifierFetchFailed(on connection: ConnectionID, _ failure: StoreFailure) -> Step {
        switch progress.removeValue(forKey: connection) {
        case .fetchingVerifier, .tokenChecked: break
        default: return .actions([])
        }
        return .actions([
            .reject(.registryUnavailable, detail: "verifier lookup for \(connection) failed: \(failure)"),
            .send(connection, .error(.internal, "registry unavailable, try again")),
        ])
    }

    private mutating func challenge(
        _ user: String, clientNonce: [UInt8], verifier: PasswordVerifier?, locked: Bool, shared: SharedLoginFailures,
        on connection: ConnectionID, entropy: inout Entropy
    ) -> Step {
        let transcript = LoginTranscript(
            user: user, clientNonce: clientNonce, relayNonce: entropy.bytes(24),
            salt: verifier?.salt ?? [], iterations: verifier?.iterations ?? 0)
        progress[connection] = .challenged(transcript, verifier: verifier, locked: locked, shared: shared)
        var challenge = SIMPMessage(kind: .challenge, toUser: user)
        challenge.nonce = transcript.relayNonce
        challenge.salt = transcript.salt
        challenge.iterations = transcript.iterations
        return .actions([.send(connection, challenge)])
    }

    /// CONNECT: checks the proof of the challenged login (or, without login, accepts the
    /// claimed user).
    public mutating func connect(
        _ connect: SIMPMessage, on connection: ConnectionID, host: String, now: NIODeadline, entropy: inout Entropy
    ) -> Step {
        guard connect.udpPort > 0, connect.udpPort <= 65535 else {
            return .actions([
                .reject(.missingField, detail: "CONNECT without UDP port on \(connection)"),
                .send(connection, .error(.badRequest, "CONNECT needs udpPort (1-65535)")),
            ])
        }
        var connected = SIMPMessage(kind: .connected)
        switch progress[connection] {
        case .challenged(let transcript, let verifier?, let locked, let shared):
            progress[connection] = nil
            guard connect.fromUser == transcript.user,
                let verified = LoginVerification.verify(proof: connect.proof, transcript: transcript, verifier: verifier)
            else { return failed(transcript.user, on: connection, host: host, now: now, shared: shared, why: "wrong proof") }
            guard !locked else {
                // The proof was right: saying "locked" tells nothing to someone without the password.
                return failed(
                    transcript.user, on: connection, host: host, now: now, shared: shared, why: "the user is locked", answer: Self.lockedText)
            }
            failures.succeeded(transcript.user, from: host, now: now)
            connected.proof = verified.signature
            return .accepted(user: transcript.user, secret: verified.sessionSecret, connected: connected)
        case .challenged(let transcript, nil, _, _):
            progress[connection] = nil
            let secret = entropy.bytes(32)
            connected.sessionSecret = secret
            return .accepted(user: transcript.user, secret: secret, connected: connected)
        case .fetchingVerifier, .tokenChecked:
            return .actions(Self.alreadyLoggingIn(connection))
        case nil: // CONNECT without AUTH
            guard !requireLogin else {
                return .actions([
                    .reject(.authRequired, detail: "CONNECT without login on \(connection)"),
                    .send(connection, .error(.authRequired, "this relay requires a login: send AUTH first")),
                ])
            }
            if let refused = rateLimited(connection, host: host, now: now) { return .actions(refused) }
            guard !connect.fromUser.isEmpty else {
                return .actions([
                    .reject(.missingField, detail: "CONNECT without user on \(connection)"),
                    .send(connection, .error(.badRequest, "CONNECT needs fromUser and udpPort (1-65535)")),
                ])
            }
            let secret = entropy.bytes(32)
            connected.sessionSecret = secret
            return .accepted(user: connect.fromUser, secret: secret, connected: connected)
        }
    }

    static func alreadyLoggingIn(_ connection: ConnectionID) -> [RelayAction] {
        [
            .reject(.alreadyConnected, detail: "\(connection)"),
            .send(connection, .error(.alreadyConnected, "this connection already has a session or a login under way")),
        ]
    }

    /// The AUTH_FAILED text for a locked user whose proof was right (docs/PROTOCOL.md §4.2).
    public static let lockedText = "login failed: your account is locked by the relay's operator"

    /// A wrong proof (the same answer whether the user exists or not, the reason only in the
    /// relay's log) or, with `answer`, a locked user who proved the password; the connection
    /// closes and the name backs off at `host`, on this relay and (through the store's shared
    /// counts) on every other.
    mutating func failed(
        _ user: String, on connection: ConnectionID, host: String, now: NIODeadline, shared: SharedLoginFailures, why: String,
        answer: String = "login failed: unknown user or wrong password", code: SIMPMessage.ErrorCode = .authFailed,
        reason: RejectReason = .authFailed
    ) -> Step {
        let byName = failures.countsByName(user, from: host, now: now, shared: shared)
        failures.failed(user, from: host, now: now, shared: shared)
        return .actions([
            .reject(reason, detail: "login as \"\(user)\" from \(host) on \(connection): \(why)"),
            .send(connection, .error(code, answer)),
            .store(.recordLogin(LoginOutcome(user: user, host: host, succeeded: false, byName: byName, policy: failures.policy))),
            .close(connection),
        ])
    }

    /// What the store records of a successful login as `user` from `host` (nil on a relay that
    /// does not authenticate).
    func success(_ user: String, from host: String) -> LoginOutcome? {
        requireLogin ? LoginOutcome(user: user, host: host, succeeded: true, byName: false, policy: failures.policy) : nil
    }

    mutating func rateLimited(_ connection: ConnectionID, host: String, now: NIODeadline) -> [RelayAction]? {
        guard let wait = rates.admit(host, now: now) else { return nil }
        return [
            .reject(.loginRateLimited, detail: "\(connection) from \(host)"),
            .send(connection, .loginRateLimited("too many login attempts from \(host)", retryAfter: wait)),
            .close(connection),
        ]
    }
}

extension SIMPMessage {
    /// An ERROR RATE_LIMITED refusing a login: `retryAfterMillis` and the text both say when to
    /// try again ("…, retry in 4 s"), so a client that shows only the text tells its user too.
    public static func loginRateLimited(_ text: String, retryAfter: TimeAmount) -> SIMPMessage {
        .rateLimited("\(text), retry in \(RetryDelay.text(retryAfter))", retryAfter: retryAfter)
    }
}

/// A wait as people read it: whole seconds rounded up (at least 1 s), whole minutes from 2 min.
enum RetryDelay {
    static func text(_ wait: TimeAmount) -> String {
        let seconds = max(1, (wait.nanoseconds + 999_999_999) / 1_000_000_000)
        return seconds < 120 ? "\(seconds) s" : "\((seconds + 59) / 60) min"
    }
}
