import HeapModule
import NIOCore

/// The relay's sessions that logged in with an access token (docs/PROTOCOL.md §4.9): when each
/// one's token expires, the refreshes waiting for the store, and the policy that judges tokens.
/// Expiry times are wall-clock milliseconds (a token's `exp`); the part maps them to deadlines
/// through the wall clock the shell anchors (`anchor(wallMillis:at:)`).
public struct TokenSessions: Sendable {
    /// Judges tokens; nil on a relay that takes none.
    public var policy: AccessTokenPolicy?

    private struct Due: Comparable, Sendable {
        var deadline: NIODeadline
        var connection: ConnectionID
        var expires: Int64
        static func < (a: Due, b: Due) -> Bool { a.deadline < b.deadline }
    }

    /// A TOKEN_REFRESH whose token is right, waiting for the store (lock, `deny-tokens` time).
    public struct PendingRefresh: Sendable, Equatable {
        public var user: String
        public var claims: AccessTokenClaims
        public var messageId: UInt64
    }

    private var expiries: [ConnectionID: Int64] = [:]
    private var due = Heap<Due>()
    private var refreshing: [ConnectionID: PendingRefresh] = [:]
    private var wallAnchor: (deadline: NIODeadline, millis: Int64)

    public init(policy: AccessTokenPolicy?, now: NIODeadline, wallMillis: Int64 = 0) {
        self.policy = policy
        self.wallAnchor = (now, wallMillis)
    }

    /// The shell read the wall clock (`wallMillis`, ms since the epoch) at `now`.
    public mutating func anchor(wallMillis: Int64, at now: NIODeadline) { wallAnchor = (now, wallMillis) }

    /// The wall clock at `now`, from the last anchor.
    public func wallMillis(at now: NIODeadline) -> Int64 {
        wallAnchor.millis + (now - wallAnchor.deadline).nanoseconds / 1_000_000
    }

    /// When `connection`'s token expires (ms since the epoch), nil if it has none.
    public func expiry(of connection: ConnectionID) -> Int64? { expiries[connection] }

    /// `connection`'s session now expires at `expires`: it ends once that time and the leeway passed.
    public mutating func expires(_ connection: ConnectionID, at expires: Int64, now: NIODeadline) {
        expiries[connection] = expires
        let leeway = policy?.leewayMillis ?? 0
        let left = max(0, expires + leeway - wallMillis(at: now))
        due.insert(Due(deadline: now + .milliseconds(left), connection: connection, expires: expires))
    }

    /// The connection closed: nothing of it is kept.
    public mutating func forget(_ connection: ConnectionID) {
        expiries[connection] = nil
        refreshing[connection] = nil
    }

    /// A refresh on `connection` waits for the store.
    public mutating func refreshWaits(_ pending: PendingRefresh, on connection: ConnectionID) { refreshing[connection] = pending }
    /// Whether a refresh on `connection` waits for the store.
    public func isRefreshing(_ connection: ConnectionID) -> Bool { refreshing[connection] != nil }
    /// The refresh that waited on `connection`, now answered.
    public mutating func takeRefresh(on connection: ConnectionID) -> PendingRefresh? { refreshing.removeValue(forKey: connection) }

    /// When the next session's token runs out.
    public var nextDeadline: NIODeadline? { due.min?.deadline }

    /// The connections whose token ran out by `now` without a newer one, with the expiry.
    public mutating func poll(now: NIODeadline) -> [(ConnectionID, Int64)] {
        var ended: [(ConnectionID, Int64)] = []
        while let first = due.min, first.deadline <= now {
            _ = due.removeMin()
            guard expiries[first.connection] == first.expires else { continue } // refreshed since, or gone
            expiries[first.connection] = nil
            ended.append((first.connection, first.expires))
        }
        return ended
    }
}
