import NIOCore

/// Failed logins slow the guesser, not the owner (docs/PROTOCOL.md §4.2). Two backoffs count
/// them:
/// - per name and source address: the address that guesses waits, every other address of the
///   same name is untouched;
/// - per name, over addresses the name has not logged in from lately (a guesser spread over
///   many addresses): an address of one of the name's recent successful logins never waits on
///   this count, so nobody elsewhere can keep the owner out of where he usually logs in from.
/// Only the operator's `user lock` shuts a user out.
public struct FailedLogins: Sendable {
    /// How failures turn into waits, and which addresses count as the owner's.
    public struct Policy: Sendable, Equatable {
        /// Failures of one name from one address.
        public var perSource: LoginBackoff.Policy
        /// Failures of one name from addresses it has not logged in from lately.
        public var perName: LoginBackoff.Policy
        /// The addresses of a name's most recent successful logins that are remembered.
        public var knownAddresses: Int
        /// How long an address stays the owner's after his last successful login from it.
        public var knownFor: TimeAmount

        public init(
            perSource: LoginBackoff.Policy = .init(),
            perName: LoginBackoff.Policy = .init(freeFailures: 20),
            knownAddresses: Int = 8, knownFor: TimeAmount = .hours(24 * 30)
        ) {
            self.perSource = perSource
            self.perName = perName
            self.knownAddresses = knownAddresses
            self.knownFor = knownFor
        }
    }

    /// Why a login must wait, and for how long.
    public struct Wait: Sendable, Equatable {
        public var time: TimeAmount
        /// True: the name's failures from addresses it does not log in from; false: this address's.
        public var byName: Bool
    }

    public let policy: Policy
    private var bySource: LoginBackoff
    private var byName: LoginBackoff
    /// Per name, the addresses of its recent successful logins and when each was last used.
    private var known: [String: [String: NIODeadline]] = [:]

    public init(_ policy: Policy = .init()) {
        self.policy = policy
        self.bySource = LoginBackoff(policy.perSource)
        self.byName = LoginBackoff(policy.perName)
    }

    /// How long a login as `user` from `host` must still wait, by this relay's counts and those
    /// all relays share (`shared`, read from the store with the verifier); nil if it need not.
    public func wait(_ user: String, from host: String, now: NIODeadline, shared: SharedLoginFailures = .none) -> Wait? {
        let sharedSource = shared.fromSource.flatMap { policy.perSource.wait(failures: $0.failures, sinceLast: $0.sinceLast) }
        let source = Self.longer(bySource.wait(Self.key(user, host), now: now), sharedSource)
        let known = shared.sourceIsKnown || isKnown(host, for: user, now: now)
        let sharedName = shared.byName.flatMap { policy.perName.wait(failures: $0.failures, sinceLast: $0.sinceLast) }
        let name = known ? nil : Self.longer(byName.wait(user, now: now), sharedName)
        switch (source, name) {
        case (nil, nil): return nil
        case (let source?, nil): return Wait(time: source, byName: false)
        case (nil, let name?): return Wait(time: name, byName: true)
        case (let source?, let name?): return Wait(time: max(source, name), byName: name > source)
        }
    }

    /// A login as `user` from `host` failed.
    public mutating func failed(_ user: String, from host: String, now: NIODeadline, shared: SharedLoginFailures = .none) {
        bySource.failed(Self.key(user, host), now: now)
        if countsByName(user, from: host, now: now, shared: shared) { byName.failed(user, now: now) }
    }

    /// A login as `user` from `host` succeeded: the address's failures are forgotten and it
    /// becomes one of the name's known addresses (the oldest drops out beyond `knownAddresses`).
    /// The name's count stays: a guesser elsewhere keeps waiting.
    public mutating func succeeded(_ user: String, from host: String, now: NIODeadline) {
        bySource.succeeded(Self.key(user, host))
        var addresses = (known[user] ?? [:]).filter { now - $0.value < policy.knownFor }
        addresses[host] = now
        while addresses.count > max(policy.knownAddresses, 1), let oldest = addresses.min(by: { $0.value < $1.value }) {
            addresses[oldest.key] = nil
        }
        known[user] = addresses
    }

    /// Entries remembered: (name, address) pairs and names with failures.
    public var count: Int { bySource.count + byName.count }

    private func isKnown(_ host: String, for user: String, now: NIODeadline) -> Bool {
        guard let last = known[user]?[host] else { return false }
        return now - last < policy.knownFor
    }

    /// Whether `host` counts toward `user`'s per-name failures (it is not one of its recent
    /// login addresses, here or, by `shared`, on any relay).
    public func countsByName(_ user: String, from host: String, now: NIODeadline, shared: SharedLoginFailures = .none) -> Bool {
        !shared.sourceIsKnown && !isKnown(host, for: user, now: now)
    }

    private static func longer(_ a: TimeAmount?, _ b: TimeAmount?) -> TimeAmount? {
        switch (a, b) {
        case (let a?, let b?): return max(a, b)
        default: return a ?? b
        }
    }

    /// An address holds no NUL, so the pair splits at the last one: no two pairs share a key.
    private static func key(_ user: String, _ host: String) -> String { "\(user)\u{0}\(host)" }
}

/// Failed-login counts every relay of a store shares (docs/PROTOCOL.md §4.2, §7.6), read with
/// a login's verifier: so N relays do not give a guesser N times the guesses.
public struct SharedLoginFailures: Sendable, Equatable {
    /// Failures in a row, the last `sinceLast` ago.
    public struct Count: Sendable, Equatable {
        public var failures: Int
        public var sinceLast: TimeAmount
        public init(failures: Int, sinceLast: TimeAmount) {
            self.failures = failures
            self.sinceLast = sinceLast
        }
    }

    /// The name's failures from this address.
    public var fromSource: Count?
    /// The name's failures from addresses it has not logged in from lately.
    public var byName: Count?
    /// Whether this address is one of the name's recent successful-login addresses.
    public var sourceIsKnown: Bool

    public init(fromSource: Count? = nil, byName: Count? = nil, sourceIsKnown: Bool = false) {
        self.fromSource = fromSource
        self.byName = byName
        self.sourceIsKnown = sourceIsKnown
    }

    /// Nothing shared (a store that keeps no counts).
    public static let none = SharedLoginFailures()
}

/// A login's outcome for the shared counts (`StoreRequest.recordLogin`): a failure adds to the
/// name's count at `host` (and, `byName`, to its count over unknown addresses); a success
/// clears the count at `host` and makes it one of the name's known addresses.
public struct LoginOutcome: Sendable, Equatable {
    public var user: String
    public var host: String
    public var succeeded: Bool
    public var byName: Bool
    /// How long counts and known addresses are kept (the relay's `FailedLogins.Policy`).
    public var policy: FailedLogins.Policy

    public init(user: String, host: String, succeeded: Bool, byName: Bool, policy: FailedLogins.Policy) {
        self.user = user
        self.host = host
        self.succeeded = succeeded
        self.byName = byName
        self.policy = policy
    }
}
