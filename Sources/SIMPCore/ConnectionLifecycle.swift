import NIOCore

/// The client's connection lifecycle, without I/O: which configured relay to connect to (in
/// turn at the first connect, the next one after a loss: failover), when a login has waited
/// too long, which failures mean a relay could not be reached, and whether the user closed the
/// client. `ClientSession` owns it (with its `Backoff` and `stopped`, which decide when to try
/// again and whether to stop for good); `ClientSession+Lifecycle` has the entry points, and the
/// shell only opens the connections and starts the timers they name.
public struct ConnectionLifecycle: Sendable, Equatable {
    /// Why a connect attempt (opening the control connection, then logging in) failed, as the
    /// shell saw it.
    public enum Failure: Sendable, Equatable {
        /// The connection could not be opened, or was closed during the login:
        /// `relayAndReason` is `HOST:PORT (why)`.
        case cannotConnect(relayAndReason: String)
        /// No answer in time: `what` says to what ("waiting for the relay to accept the login").
        case timedOut(what: String)
        /// Anything else: the relay refused the login, a TLS failure, a refused access token,
        /// the user closed the client.
        case other
    }

    /// What follows a failed attempt of the first connect (`SIMPClient.connect`).
    public enum FirstConnectStep: Sendable, Equatable {
        /// Try relay `relay` now; `unreachable` names the one that failed and why, if it could
        /// not be reached (nil: it failed otherwise).
        case tryNext(relay: Int, unreachable: String?)
        /// The connect fails. With `unreachable`, with every relay that could not be reached
        /// and why (more than one was tried and none answered); otherwise with the last error.
        case fail(unreachable: [String]?)
    }

    /// The configured relays' names (`HOST:PORT`), the first one first (at least one).
    public let relays: [String]
    /// How long the relay has to accept a login once the control connection is open.
    public let loginTimeout: TimeAmount
    /// The index in `relays` of the relay to connect to next.
    public private(set) var current = 0
    /// Set when the user closed the client: nothing is connected again, and the coming
    /// connection loss is the user's own doing.
    public private(set) var closedByUser = false
    /// Whether the user was warned that the control channel has no TLS (once per client:
    /// `connecting(host:usesTLS:)`).
    public internal(set) var warnedWithoutTLS = false
    /// When the login under way times out; nil when none is under way.
    public private(set) var loginDeadline: NIODeadline?
    /// During the first connect: how many relays are left to try (counting the one being
    /// tried), and those that could not be reached, with why.
    var firstConnect: FirstConnect?

    struct FirstConnect: Sendable, Equatable {
        var left: Int
        var unreachable: [String]
    }

    public init(relays: [String], loginTimeout: TimeAmount) {
        precondition(!relays.isEmpty, "a client needs at least one relay")
        self.relays = relays
        self.loginTimeout = loginTimeout
    }

    /// The name of the relay to connect to next.
    public var currentRelay: String { relays[current] }

    /// The first connect starts: each relay is tried once, in turn, from the current one.
    public mutating func firstConnectStarted() {
        firstConnect = FirstConnect(left: relays.count, unreachable: [])
    }

    /// An attempt of the first connect failed with `failure`: the next relay is tried unless
    /// every one was (or the user closed the client). When none could be reached (refused,
    /// timed out), the connect fails naming each with its reason; any other failure (a refused
    /// login) is the last one's.
    public mutating func firstConnectFailed(_ failure: Failure) -> FirstConnectStep {
        var tally = firstConnect ?? FirstConnect(left: 1, unreachable: [])
        let reason = Self.unreachable(currentRelay, failure)
        if let reason { tally.unreachable.append(reason) }
        guard tally.left > 1, !closedByUser else {
            firstConnect = nil
            return .fail(unreachable: reason != nil && tally.unreachable.count > 1 ? tally.unreachable : nil)
        }
        tally.left -= 1
        firstConnect = tally
        failover()
        return .tryNext(relay: current, unreachable: reason)
    }

    /// The first connect succeeded (or was abandoned).
    public mutating func firstConnectEnded() {
        firstConnect = nil
    }

    /// `HOST:PORT (why)` for a relay that could not be reached (the connection failed, or the
    /// login got no answer in time); nil for any other failure.
    public static func unreachable(_ relay: String, _ failure: Failure) -> String? {
        switch failure {
        case .cannotConnect(let relayAndReason): relayAndReason
        case .timedOut(let what): "\(relay) (timed out \(what))"
        case .other: nil
        }
    }

    /// Moves on to the next configured relay (failover); returns the index it moved from, or
    /// nil when there is only one relay.
    @discardableResult
    public mutating func failover() -> Int? {
        guard relays.count > 1 else { return nil }
        let previous = current
        current = (current + 1) % relays.count
        return previous
    }

    /// The control connection is open and the login starts: returns when it times out (the
    /// shell calls `loginTimedOut` then).
    public mutating func loginStarted(now: NIODeadline) -> NIODeadline {
        let deadline = now + loginTimeout
        loginDeadline = deadline
        return deadline
    }

    /// The login under way ended (accepted, refused, or its connection failed).
    public mutating func loginEnded() {
        loginDeadline = nil
    }

    /// Whether the login under way has waited too long at `now`: it then fails, as if the
    /// relay did not answer. False for a timer of a login that has ended.
    public mutating func loginTimedOut(now: NIODeadline) -> Bool {
        guard let loginDeadline, now >= loginDeadline else { return false }
        self.loginDeadline = nil
        return true
    }

    /// The control connection closed during the login: why the attempt failed. A relay that
    /// runs TLS closes a plain-TCP client's connection without a word, so without TLS that is
    /// said (`usesTLS`: the client has TLS on, the loss is just a loss).
    public func closedDuringLogin(usesTLS: Bool) -> Failure {
        usesTLS
            ? .other
            : .cannotConnect(
                relayAndReason: "\(currentRelay) closed the connection during the login (a relay that runs TLS does this to a client without --tls)")
    }

    /// The user closed the client: nothing is connected again.
    public mutating func userClosed() {
        closedByUser = true
    }

    /// What a refused login stops with, said to the user: the relay's reason without the
    /// login's own "login failed: " prefix.
    public static func refusalText(_ reason: String) -> String {
        let why = reason.hasPrefix("login failed: ") ? String(reason.dropFirst("login failed: ".count)) : reason
        return "login refused: \(why); not reconnecting"
    }
}
