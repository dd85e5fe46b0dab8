import NIOCore

/// A token bucket: `burst` tokens, refilled at `perSecond`; each admitted event takes one.
public struct TokenBucket: Sendable, Equatable {
    public private(set) var perSecond: Double
    public private(set) var burst: Double
    private var tokens: Double
    private var updated: NIODeadline

    public init(perSecond: Double, burst: Int, now: NIODeadline) {
        self.perSecond = perSecond
        self.burst = Double(max(1, burst))
        self.tokens = self.burst
        self.updated = now
    }

    /// Takes a token if there is one.
    public mutating func admit(now: NIODeadline) -> Bool {
        refill(now: now)
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }

    /// How long until a token is available (zero if one is).
    public func retryAfter(now: NIODeadline) -> TimeAmount {
        var copy = self
        copy.refill(now: now)
        guard copy.tokens < 1, perSecond > 0 else { return .zero }
        return .nanoseconds(Int64((1 - copy.tokens) / perSecond * 1e9))
    }

    /// When the next token is available (at or before `now` if one is). Rounded up by a
    /// microsecond, so that `admit` at that time certainly finds the token.
    public var nextTokenAt: NIODeadline {
        guard tokens < 1, perSecond > 0 else { return updated }
        return updated + .nanoseconds(Int64(((1 - tokens) / perSecond * 1e9).rounded(.up)) + 1000)
    }

    /// Takes every token and adds none before `until`: the next one comes `1 / perSecond` after it.
    public mutating func empty(until: NIODeadline) {
        tokens = 0
        updated = max(updated, until)
    }

    /// Refills at `limit`'s rate from `now` on, holding at most its burst.
    public mutating func change(to limit: RateLimit, now: NIODeadline) {
        refill(now: now)
        perSecond = limit.perSecond
        burst = Double(max(1, limit.burst))
        tokens = min(tokens, burst)
    }

    /// Whether the bucket is full again (and can be forgotten).
    public func isFull(now: NIODeadline) -> Bool {
        var copy = self
        copy.refill(now: now)
        return copy.tokens >= burst
    }

    private mutating func refill(now: NIODeadline) {
        guard now > updated else { return }
        let seconds = Double((now - updated).nanoseconds) / 1e9
        tokens = min(burst, tokens + seconds * perSecond)
        updated = now
    }
}

/// A rate and a burst, as operators configure them.
public struct RateLimit: Sendable, Equatable {
    public var perSecond: Double
    public var burst: Int
    public init(perSecond: Double, burst: Int) {
        self.perSecond = perSecond
        self.burst = burst
    }

    /// The same limit at another rate, with a burst of the same number of seconds' worth.
    public func scaled(toPerSecond rate: Double) -> RateLimit {
        RateLimit(perSecond: rate, burst: Int(max(1, (rate * Double(burst) / perSecond).rounded())))
    }
}

/// One token bucket per key (a user, an IP address), created on first use and forgotten
/// once full again, so idle keys cost nothing.
public struct RateLimiter<Key: Hashable & Sendable>: Sendable {
    public let limit: RateLimit
    private var buckets: [Key: TokenBucket] = [:]
    private var nextSweep: NIODeadline?

    public init(_ limit: RateLimit) { self.limit = limit }

    /// Admits one event for `key`, or says how long until one would be admitted.
    public mutating func admit(_ key: Key, now: NIODeadline) -> TimeAmount? {
        sweep(now: now)
        var bucket = buckets[key] ?? TokenBucket(perSecond: limit.perSecond, burst: limit.burst, now: now)
        defer { buckets[key] = bucket }
        return bucket.admit(now: now) ? nil : max(bucket.retryAfter(now: now), .milliseconds(1))
    }

    /// Whether `key` has a full bucket (nothing used lately).
    public func isIdle(_ key: Key, now: NIODeadline) -> Bool {
        buckets[key]?.isFull(now: now) ?? true
    }

    /// Keys with a partly used bucket.
    public var trackedKeys: Int { buckets.count }

    private mutating func sweep(now: NIODeadline) {
        if let nextSweep, now < nextSweep { return }
        nextSweep = now + .seconds(10)
        buckets = buckets.filter { !$0.value.isFull(now: now) }
    }
}

/// The per-user content rate limit, charging each message once: a retransmission of a message
/// already admitted (same sender, same `messageId`, within the last `window` ids) passes free,
/// so a sender catching up after an outage is not refused for its retransmissions.
/// A refused message is not remembered: its next copy is charged again.
///
/// A key's bucket and charged ids are one entry, changed in place: one hash of the key per
/// message (the relay's data path calls this for every content datagram).
public struct MessageRateLimiter<Key: Hashable & Sendable>: Sendable {
    /// One key's bucket and the ids charged to it.
    private struct Entry: Sendable {
        var bucket: TokenBucket
        var charged: DedupeWindow
    }

    public let limit: RateLimit
    private var entries: [Key: Entry] = [:]
    /// Ids remembered per key (twice `RetransmitPolicy.maxIdSpan`: every retransmitted id fits).
    public let window: UInt64
    private var nextSweep: NIODeadline?

    public init(_ limit: RateLimit, window: UInt64 = 2048) {
        self.limit = limit
        self.window = window
    }

    /// Admits message `messageId` of `key`, or says how long until a new one would be admitted.
    public mutating func admit(_ key: Key, messageId: UInt64, now: NIODeadline) -> TimeAmount? {
        sweep(now: now)
        // A known key's entry is changed in place through its index; the `default:` subscript
        // would allocate a closure context for the new entry on every call.
        if let index = entries.index(forKey: key) { return Self.admit(messageId, now: now, &entries.values[index]) }
        var entry = Self.newEntry(limit, window, now: now)
        defer { entries[key] = entry }
        return Self.admit(messageId, now: now, &entry)
    }

    /// A key's first entry: a full bucket, nothing charged.
    private static func newEntry(_ limit: RateLimit, _ window: UInt64, now: NIODeadline) -> Entry {
        Entry(bucket: TokenBucket(perSecond: limit.perSecond, burst: limit.burst, now: now), charged: DedupeWindow(size: window))
    }

    private static func admit(_ messageId: UInt64, now: NIODeadline, _ entry: inout Entry) -> TimeAmount? {
        if entry.charged.contains(messageId) { return nil }
        guard entry.bucket.admit(now: now) else { return max(entry.bucket.retryAfter(now: now), .milliseconds(1)) }
        _ = entry.charged.accept(messageId)
        return nil
    }

    /// Forgets the keys whose bucket is full again (idle): a retransmission charged anew then
    /// is admitted anyway.
    private mutating func sweep(now: NIODeadline) {
        if let nextSweep, now < nextSweep { return }
        nextSweep = now + .seconds(10)
        entries = entries.filter { !$0.value.bucket.isFull(now: now) }
    }
}
