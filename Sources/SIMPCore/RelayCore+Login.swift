import NIOCore

/// Login (docs/PROTOCOL.md §3): AUTH → CHALLENGE → CONNECT with proof → CONNECTED with the
/// relay's signature and the session id. A relay that does not require login answers AUTH with
/// iterations 0 and accepts CONNECT without proof, handing out the session secret in clear.
extension RelayCore {
    /// AUTH: after the address's login rate limit, ask Redis for the verifier (or, without
    /// login, challenge at once).
    mutating func startLogin(_ auth: SIMPMessage, on connection: ConnectionID, now: NIODeadline) -> [Action] {
        if let refused = loginRateLimited(on: connection, now: now) { return refused }
        guard !auth.fromUser.isEmpty, (16...64).contains(auth.nonce.count) else {
            return [.reject(.missingField, detail: "AUTH without user or with a bad nonce on \(connection)"),
                    .send(connection, .error(.badRequest, "AUTH needs fromUser and a nonce of 16-64 bytes"))]
        }
        guard configuration.requireLogin else {
            return challenge(auth.fromUser, clientNonce: auth.nonce, verifier: nil, on: connection)
        }
        connections[connection]?.state = .fetchingVerifier(user: auth.fromUser, clientNonce: auth.nonce)
        return [.fetchVerifier(user: auth.fromUser, connection: connection)]
    }

    /// Redis answered `.fetchVerifier`: nil means no such user, which gets a decoy challenge
    /// that no password answers, so the reply does not tell whether the user exists.
    public mutating func verifierFetched(_ connection: ConnectionID, verifier: PasswordVerifier?) -> [Action] {
        guard case .fetchingVerifier(let user, let clientNonce) = connections[connection]?.state else { return [] }
        let verifier = verifier ?? LoginVerification.decoy(
            for: user, secret: configuration.decoySecret, iterations: PasswordVerifier.defaultIterations)
        return challenge(user, clientNonce: clientNonce, verifier: verifier, on: connection)
    }

    /// Redis could not be asked for a verifier.
    public mutating func verifierFetchFailed(_ connection: ConnectionID) -> [Action] {
        guard case .fetchingVerifier = connections[connection]?.state else { return [] }
        connections[connection]?.state = .awaitingLogin
        return [.reject(.registryUnavailable, detail: "verifier lookup for \(connection) failed"),
                .send(connection, .error(.internal, "registry unavailable, try again"))]
    }

    private mutating func challenge(_ user: String, clientNonce: [UInt8], verifier: PasswordVerifier?, on connection: ConnectionID) -> [Action] {
        let transcript = LoginTranscript(
            user: user, clientNonce: clientNonce, relayNonce: LoginCrypto.randomBytes(24),
            salt: verifier?.salt ?? [], iterations: verifier?.iterations ?? 0)
        connections[connection]?.state = .challenged(transcript, verifier: verifier)
        var challenge = SIMPMessage(kind: .challenge, toUser: user)
        challenge.nonce = transcript.relayNonce
        challenge.salt = transcript.salt
        challenge.iterations = transcript.iterations
        return [.send(connection, challenge)]
    }

    /// CONNECT: checks the proof of the challenged login (or, without login, accepts the
    /// claimed user) and starts the session.
    mutating func finishLogin(_ connect: SIMPMessage, on connection: ConnectionID, peer: SocketAddress, now: NIODeadline) -> [Action] {
        guard connect.udpPort > 0, connect.udpPort <= 65535, peer.port != nil else {
            return [.reject(.missingField, detail: "CONNECT without UDP port on \(connection)"),
                    .send(connection, .error(.badRequest, "CONNECT needs udpPort (1-65535)"))]
        }
        let user: String, secret: [UInt8]
        var connected = SIMPMessage(kind: .connected)
        switch connections[connection]?.state {
        case .challenged(let transcript, let verifier?):
            guard connect.fromUser == transcript.user,
                  let verified = LoginVerification.verify(proof: connect.proof, transcript: transcript, verifier: verifier)
            else { return loginFailed(transcript.user, on: connection, peer: peer) }
            (user, secret) = (transcript.user, verified.sessionSecret)
            connected.proof = verified.signature
        case .challenged(let transcript, nil):
            (user, secret) = (transcript.user, LoginCrypto.randomBytes(32))
            connected.sessionSecret = secret
        default: // CONNECT without AUTH
            guard !configuration.requireLogin else {
                return [.reject(.authRequired, detail: "CONNECT without login on \(connection)"),
                        .send(connection, .error(.authRequired, "this relay requires a login: send AUTH first"))]
            }
            if let refused = loginRateLimited(on: connection, now: now) { return refused }
            guard !connect.fromUser.isEmpty else {
                return [.reject(.missingField, detail: "CONNECT without user on \(connection)"),
                        .send(connection, .error(.badRequest, "CONNECT needs fromUser and udpPort (1-65535)"))]
            }
            (user, secret) = (connect.fromUser, LoginCrypto.randomBytes(32))
            connected.sessionSecret = secret
        }
        let keys = SessionKeys(sessionId: newSessionId(), secret: secret)
        connected.toUser = user
        connected.udpPort = UInt32(configuration.udpPort)
        connected.relayId = configuration.relayId
        connected.sessionId = keys.sessionId
        connected.maxDatagramSize = UInt32(configuration.maxDatagramSize)
        return beginSession(user, keys: keys, connected: connected, on: connection, peer: peer, udpPort: Int(connect.udpPort))
    }

    /// A wrong proof: the same answer whether the user exists or not; the connection closes.
    private mutating func loginFailed(_ user: String, on connection: ConnectionID, peer: SocketAddress) -> [Action] {
        connections[connection]?.state = .awaitingLogin
        return [.reject(.authFailed, detail: "login as \"\(user)\" from \(peer.ipAddress ?? "?") on \(connection)"),
                .send(connection, .error(.authFailed, "login failed: unknown user or wrong password")),
                .close(connection)]
    }

    private mutating func loginRateLimited(on connection: ConnectionID, now: NIODeadline) -> [Action]? {
        guard let host = connections[connection]?.host, let wait = loginRates.admit(host, now: now) else { return nil }
        return [.reject(.loginRateLimited, detail: "\(connection) from \(host)"),
                .send(connection, .rateLimited("too many login attempts from \(host)", retryAfter: wait)),
                .close(connection)]
    }
}
