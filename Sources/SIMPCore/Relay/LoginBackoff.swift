import NIOCore

/// Failed logins per key (a user name, or a name and an address: `FailedLogins`,
/// docs/PROTOCOL.md §4.2): after `freeFailures` failures in a row each further failure makes the
/// key wait, twice as long each time up to `maxDelay`, before its next AUTH is answered. Names
/// that do not exist are counted like real ones, so the backoff tells nothing about which names
/// exist. A successful login clears the key; a key without failures for `forgetAfter` is forgotten.
public struct LoginBackoff: Sendable {
    /// How failures turn into waits.
    public struct Policy: Sendable, Equatable {
        /// Failures in a row that cost nothing.
        public var freeFailures: Int
        /// The wait after the first failure beyond the free ones.
        public var firstDelay: TimeAmount
        /// The longest wait.
        public var maxDelay: TimeAmount
        /// A name without failures for this long starts again from zero.
        public var forgetAfter: TimeAmount

        public init(
            freeFailures: Int = 5, firstDelay: TimeAmount = .seconds(1), maxDelay: TimeAmount = .minutes(5),
            forgetAfter: TimeAmount = .minutes(15)
        ) {
            self.freeFailures = freeFailures
            self.firstDelay = firstDelay
            self.maxDelay = maxDelay
            self.forgetAfter = forgetAfter
        }

        /// The wait after `beyond` failures past the free ones (`beyond` ≥ 1).
        func delay(beyond: Int) -> TimeAmount {
            .nanoseconds(min(firstDelay.nanoseconds << Int64(min(beyond - 1, 30)), maxDelay.nanoseconds))
        }

        /// How long a key with `failures` failures in a row, the last `sinceLast` ago, must still
        /// wait (nil: it need not); the same waits as `LoginBackoff` keeps, from counts that
        /// other relays share (`SharedLoginFailures`).
        public func wait(failures: Int, sinceLast: TimeAmount) -> TimeAmount? {
            let beyond = failures - freeFailures
            guard beyond > 0, sinceLast < forgetAfter else { return nil }
            let left = delay(beyond: beyond) - sinceLast
            return left > .zero ? left : nil
        }
    }

    private struct Record: Sendable {
        var failures: Int
        var last: NIODeadline
        var until: NIODeadline
    }

    public let policy: Policy
    private var records: [String: Record] = [:]
    private var nextSweep: NIODeadline?

    public init(_ policy: Policy) { self.policy = policy }

    /// How long `key` must still wait before a login is answered; nil if it need not.
    public func wait(_ key: String, now: NIODeadline) -> TimeAmount? {
        guard let record = records[key], record.until > now else { return nil }
        return record.until - now
    }

    /// A login of `key` failed.
    public mutating func failed(_ key: String, now: NIODeadline) {
        sweep(now: now)
        var record = records[key].flatMap { now - $0.last < policy.forgetAfter ? $0 : nil } ?? Record(failures: 0, last: now, until: now)
        record.failures += 1
        record.last = now
        let beyond = record.failures - policy.freeFailures
        if beyond > 0 { record.until = now + policy.delay(beyond: beyond) }
        records[key] = record
    }

    /// A login of `key` succeeded: its failures are forgotten.
    public mutating func succeeded(_ key: String) {
        records[key] = nil
    }

    /// Keys with failures remembered.
    public var count: Int { records.count }

    /// Forgets keys idle for `forgetAfter`, at most once per `forgetAfter`.
    private mutating func sweep(now: NIODeadline) {
        guard nextSweep.map({ now >= $0 }) ?? true else { return }
        nextSweep = now + policy.forgetAfter
        records = records.filter { now - $0.value.last < policy.forgetAfter || $0.value.until > now }
    }
}
