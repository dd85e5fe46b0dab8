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

    /// How long a login as `user` from `host` must still wait; nil if it need not.
    public func wait(_ user: String, from host: String, now: NIODeadline) -> Wait? {
        let source = bySource.wait(Self.key(user, host), now: now)
        let name = isKnown(host, for: user, now: now) ? nil : byName.wait(user, now: now)
        switch (source, name) {
        case (nil, nil): return nil
        case (let source?, nil): return Wait(time: source, byName: false)
        case (nil, let name?): return Wait(time: name, byName: true)
        case (let source?, let name?): return Wait(time: max(source, name), byName: name > source)
        }
    }

    /// A login as `user` from `host` failed.
    public mutating func failed(_ user: String, from host: String, now: NIODeadline) {
        bySource.failed(Self.key(user, host), now: now)
        if !isKnown(host, for: user, now: now) { byName.failed(user, now: now) }
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

    /// An address holds no NUL, so the pair splits at the last one: no two pairs share a key.
    private static func key(_ user: String, _ host: String) -> String { "\(user)\u{0}\(host)" }
}
