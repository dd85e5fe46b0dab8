import NIOCore

/// Keeps a client's content transmissions under the relay's per-user content rate limit, so a
/// backlog (after an outage, or a burst of new messages) goes out as fast as the relay admits
/// it instead of being refused and retransmitted.
///
/// Every transmission the relay may charge takes a token: a first transmission, and a
/// retransmission too (the relay charges a message id when its first copy arrives, so a
/// retransmission is charged whenever no earlier copy got through, which the client cannot
/// tell). The client thus charges at least what the relay charges, a little earlier, and with
/// a rate and burst at or below the relay's it runs dry first: the relay refuses nothing.
///
/// The relay announces its per-user limit in CONNECTED (`messageRateLimit`, docs/PROTOCOL.md
/// §4.2): the client then paces at 90 % of it (`limit(announced:otherwise:)`); a relay that does
/// not announce it is assumed to have the default limit. A RATE_LIMITED notice (another process
/// of the same user sends too, or the relay's limit is lower) halves the rate and admits
/// nothing until the relay's `retryAfter`; each second without a notice then raises the rate
/// by a quarter, up to the limit.
public struct SendPacer: Sendable {
    /// The most this client sends: the relay's limit with a margin (`ClientSession.Configuration.pacing`,
    /// or from the relay's announced rate).
    public private(set) var limit: RateLimit
    /// The rate now: `limit`'s, or less after RATE_LIMITED notices.
    public private(set) var rate: Double
    /// RATE_LIMITED notices received.
    public private(set) var refusals = 0
    private var bucket: TokenBucket?
    /// When the rate was last lowered or raised.
    private var lastChange: NIODeadline?

    public init(_ limit: RateLimit) {
        self.limit = limit
        self.rate = limit.perSecond
    }

    /// The pacing under a relay that announced `messageRateLimit` per second in CONNECTED: 90 %
    /// of it, with a burst of the same share of a second as `ClientSession.defaultPacing`'s
    /// (50 at 450/s: a ninth), at most `maxBurst`; `otherwise` for a relay that announced
    /// nothing (0: a relay older than the field).
    public static func limit(announced messageRateLimit: UInt32, otherwise: RateLimit) -> RateLimit {
        guard messageRateLimit > 0 else { return otherwise }
        let paced = ClientSession.defaultPacing.scaled(toPerSecond: Double(messageRateLimit) * 0.9)
        return RateLimit(perSecond: paced.perSecond, burst: min(paced.burst, maxBurst))
    }

    /// The largest burst paced from an announced rate: a burst of retransmissions after an
    /// outage (two datagrams each) reordered by the link must stay well inside the relay's
    /// 1,024-counter replay window (docs/PROTOCOL.md §6.2).
    public static let maxBurst = 100

    /// Paces under `limit` from `now` on (a relay announced its rate): a rate lowered by
    /// RATE_LIMITED notices starts again from the new limit. Nothing changes if it is the same.
    public mutating func change(to limit: RateLimit, now: NIODeadline) {
        guard limit != self.limit else { return }
        self.limit = limit
        rate = limit.perSecond
        lastChange = nil
        bucket?.change(to: limit, now: now)
    }

    /// Takes a token for one transmission if one is available at `now`.
    public mutating func take(now: NIODeadline) -> Bool {
        recover(now: now)
        if bucket == nil { bucket = TokenBucket(perSecond: limit.perSecond, burst: limit.burst, now: now) }
        return bucket!.admit(now: now)
    }

    /// When the next token is available (at or before now if one is).
    public var nextTokenAt: NIODeadline? { bucket?.nextTokenAt }

    /// The relay refused a message and admits the next one `retryAfter` from `now`.
    public mutating func refused(retryAfter: TimeAmount, now: NIODeadline) {
        refusals += 1
        rate = max(limit.perSecond / 64, rate / 2)
        lastChange = now
        var bucket = self.bucket ?? TokenBucket(perSecond: rate, burst: limit.burst, now: now)
        bucket.change(to: limit.scaled(toPerSecond: rate), now: now)
        bucket.empty(until: now + retryAfter)
        self.bucket = bucket
    }

    /// Raises a lowered rate by a quarter per second since it last changed.
    private mutating func recover(now: NIODeadline) {
        guard rate < limit.perSecond, let last = lastChange, now - last >= .seconds(1) else { return }
        rate = min(limit.perSecond, rate * 1.25)
        lastChange = now
        bucket?.change(to: limit.scaled(toPerSecond: rate), now: now)
    }
}
