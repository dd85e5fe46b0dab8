import NIOCore

extension ClientSession {
    /// Where a session is with the relay. What only one phase has lives in its case, so it ends
    /// with the phase: a registered session's heartbeats and keepalive cannot outlive its
    /// control connection, nor a login's nonce the login.
    public enum Phase: Equatable, Sendable {
        /// No control connection logs in or is registered: before the first connect, and from a
        /// lost connection (or a refused login) to the next login.
        case disconnected
        /// A control connection is logging in: AUTH went out, then the answer to the CHALLENGE.
        case loggingIn(LoginAttempt)
        /// The relay accepted the login: the control connection is registered.
        case registered(RegisteredState)

        /// The registered connection's state, if registered.
        public var registration: RegisteredState? {
            guard case .registered(let state) = self else { return nil }
            return state
        }
    }

    /// A login in progress.
    public struct LoginAttempt: Equatable, Sendable {
        /// The nonce AUTH sent.
        public let clientNonce: [UInt8]
        /// The UDP port CONNECT registers.
        public let udpPort: Int
        /// What the client checks the relay's proof against, once it answered the CHALLENGE.
        public internal(set) var transcript: LoginTranscript?
    }

    /// What a registered control connection keeps.
    public struct RegisteredState: Equatable, Sendable {
        /// The relay's liveness on the control connection.
        public internal(set) var heartbeat: Heartbeat
        /// `Configuration.heartbeatWhileHolding`, polled only while messages are held.
        public internal(set) var holdingHeartbeat: Heartbeat
        /// When the next keepalive datagram goes (it keeps the NAT mapping to the relay).
        public internal(set) var nextKeepalive: NIODeadline
        /// The next HELLO datagram; nil once the relay answered one or none is left to send.
        public internal(set) var nextHello: Hello?
        /// When a PING goes to confirm receipts written since the last one (`receiptConfirmDelay`).
        public internal(set) var receiptConfirmPing: NIODeadline?
    }

    /// A HELLO datagram due at `due`, with `attemptsLeft` to go counting it.
    public struct Hello: Equatable, Sendable {
        public let due: NIODeadline
        public let attemptsLeft: Int
    }

    /// Changes the registered connection's state; nothing when not registered.
    mutating func updateRegistration(_ change: (inout RegisteredState) -> Void) {
        guard case .registered(var state) = phase else { return }
        change(&state)
        phase = .registered(state)
    }
}
