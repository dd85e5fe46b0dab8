/// What the client decides and tells the user about its connection, without I/O: when to warn
/// that the control channel has no TLS, how a failed TLS handshake counts and reads, and what
/// a session that stopped for good says. The shell (`SIMPClient`) only reports what it saw (the
/// host it connects to, the handshake's error as a `TLSFailure`) and shows the text.
extension ConnectionLifecycle {
    /// What the shell saw of a TLS handshake that failed.
    public enum TLSFailure: Sendable, Equatable {
        /// The chain verified, but the certificate does not name the host: `detail` says which
        /// names it has.
        case nameMismatch(detail: String)
        /// Anything else: the chain did not verify, or the relay does not speak TLS; `error` is
        /// the TLS library's.
        case handshake(error: String)
    }

    /// A control connection to the current relay, at `host`, is about to open: the warning to
    /// log when it has no TLS and the relay is not on this machine, the first time only (the
    /// user is told once per client, not at every reconnect or failover); nil otherwise.
    public mutating func connecting(host: String, usesTLS: Bool) -> String? {
        guard !usesTLS, !warnedWithoutTLS, !Self.isLoopback(host) else { return nil }
        warnedWithoutTLS = true
        return "connecting to \(currentRelay) without TLS: the login and control frames cross the network in clear "
            + "(use --tls, with --ca if the relay's certificate is not from a public CA)"
    }

    /// Whether `host` names this machine: there a relay without TLS is development, elsewhere
    /// a risk.
    public static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || AccessTokenPolicy.isLoopback(host)
    }

    /// The TLS handshake with the current relay at `host` failed: the relay counts as one that
    /// could not be reached (the first connect tries the next and names this one with the
    /// reason). `trustedCA` is the CA file the client trusts (nil: the system's CAs).
    public func tlsFailed(_ failure: TLSFailure, host: String, trustedCA: String?) -> Failure {
        switch failure {
        case .nameMismatch(let detail):
            return .cannotConnect(relayAndReason: "TLS with \(currentRelay) failed: \(detail)")
        case .handshake(let error):
            let trusted = trustedCA.map { "the CA in \($0)" } ?? "the system's trusted CAs"
            return .cannotConnect(
                relayAndReason: "TLS with \(currentRelay) failed: the relay's certificate is not valid for \(host) or not signed by \(trusted), "
                    + "or the relay does not speak TLS (\(error))")
        }
    }
}

extension ClientSession.Stop {
    /// How the client renews its access token, for the advice when the relay ended the
    /// session because it expired.
    public enum TokenRenewal: Sendable, Equatable {
        /// No token, or a fixed one (`SIMP_TOKEN`).
        case none
        /// Read again from a file (`--token-file`).
        case file
        /// Printed by a command (`--token-command`).
        case command
    }

    /// What the user is told when the session stops for good: why, that it does not
    /// reconnect, and what to do. `device` is this client's device name ("" for the default).
    public func explanation(device: String, tokens: TokenRenewal) -> String {
        switch self {
        case .loginRefused(let reason): return ConnectionLifecycle.refusalText(reason)
        case .takenOver: return Self.takenOverText(device: device)
        case .tokenExpired(let reason):
            let fix =
                switch tokens {
                case .command: "check that --token-command still prints a valid token, then start simp again"
                case .file: "put a valid token in the --token-file, then start simp again"
                case .none: "get a new token (SIMP_TOKEN, or --token-command so simp renews it itself), then start simp again"
                }
            return "the relay ended the session: \(reason). Not reconnecting: \(fix)"
        }
    }

    /// What a client whose relay session a newer session of the same device took over says.
    public static func takenOverText(device: String) -> String {
        "another session of device \(device.isEmpty ? "(default)" : device) took over; not reconnecting"
    }

    /// What a client that lost the relay and does not reconnect (`reconnect` off) says.
    public static let connectionLostText = "connection to the relay was lost"
}
