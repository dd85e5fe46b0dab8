/// When a device publishes its key bundle again, tops up its one-time prekeys and rotates its
/// signed prekey (docs/PROTOCOL.md §4.8, "Publishing"; docs/E2E.md §3.2), sans-I/O: the shell
/// says what happened and carries out the answer. The relay's store can lose a bundle (Redis
/// restarted empty, a failover, another relay's Redis), so a device publishes at every login
/// and whenever the relay asks (a KEYS_FETCH notice: a fetch found none of its user's bundles,
/// or few of its one-time prekeys left); publishing the same bundle again costs the relay one
/// hash write and tells no one.
public struct KeyUpkeep: Sendable, Equatable {
    /// How many one-time prekeys the device keeps at the relay.
    public var oneTimePrekeys: Int
    /// How long a signed prekey is published before a new one replaces it. The one before stays
    /// accepted for as long again (a session start in flight, or a message stored for an offline
    /// device, that used it still opens); the one before that is forgotten.
    public var signedPrekeyPeriodMillis: UInt64 = 7 * 24 * 3600 * 1000

    public init(oneTimePrekeys: Int = 20) {
        self.oneTimePrekeys = oneTimePrekeys
    }

    /// How many one-time prekeys to add when the relay holds `left`: enough to reach
    /// `oneTimePrekeys` once fewer than half are left, else none.
    public func prekeysToAdd(left: Int) -> Int {
        left < oneTimePrekeys / 2 ? oneTimePrekeys - left : 0
    }

    /// Whether the signed prekey made at `madeAt` (wall-clock milliseconds; nil: not recorded,
    /// a device made before the time was kept) is due for rotation at `now`.
    public func rotatesSignedPrekey(madeAt: UInt64?, now: UInt64) -> Bool {
        guard let madeAt else { return false }
        return now >= madeAt &+ signedPrekeyPeriodMillis
    }
}
