import NIOCore

/// What one connection, one address or one user may cost the relay (docs/OPERATIONS.md §10,
/// "Limits against abuse"): how long a connection may take to log in, how many connections
/// may wait for a login, and the budget of each kind of control request.
public struct RelayLimits: Sendable, Equatable {
    /// A connection that has not logged in (CONNECTED sent, or its registration under way)
    /// this long after it opened is closed, whatever it sent meanwhile (half a frame included).
    public var loginTimeout: TimeAmount = .seconds(10)
    /// Connections not logged in yet from one IP address; one more is refused (RATE_LIMITED).
    public var maxUnauthenticatedPerHost = 256
    /// Connections not logged in yet in all; one more closes the oldest of them, so a flood of
    /// idle connections cannot keep a real client's quick login out.
    public var maxUnauthenticated = 8192
    /// Store requests (key fetches and publishes, room and presence requests) of one connection
    /// waiting for their answers; the shell stops reading the connection at this many, and a
    /// request beyond twice this many (already read) is refused.
    public var maxRequestsInFlight = 64
    /// Each control request kind's budget per connection; a user's budget (over all its
    /// connections on this relay) is twice its connection's.
    public var budgets: [ControlRequestKind: RateLimit] = ControlRequestKind.defaultBudgets
    /// One-time prekeys one user may claim from another user's devices (a KEYS_FETCH of a
    /// user claims one per device): beyond it, fetches of that user are refused, so no one
    /// requester drains anyone's prekeys.
    public var prekeyClaims = RateLimit(perSecond: 1, burst: 100)
    /// Devices one user may have: receiving devices known to the store, and devices with a
    /// published key bundle. A login of one more receiving device, or a KEYS_PUBLISH of one
    /// more device's bundle, is refused with ERROR LIMIT_REACHED (a key fetch answers with
    /// every device's bundle, so this also bounds its size).
    public var maxDevicesPerUser = 16

    public init() {}

    /// The budget of `kind` for one connection.
    public func budget(_ kind: ControlRequestKind) -> RateLimit { budgets[kind] ?? kind.defaultBudget }
}

extension RelayCore {
    /// One-time prekeys the store keeps per device: a KEYS_PUBLISH's beyond it are dropped
    /// (its answer's `prekeysLeft` says how many the device has), so no device fills Redis.
    public static let maxOneTimePrekeysPerDevice = 200
    /// Rooms one user may be a member of: one more ROOM_JOIN (which creates a room that does
    /// not exist) is refused with ERROR LIMIT_REACHED.
    public static let maxRoomsPerUser = 256
    /// Members one room may have: one more ROOM_JOIN is refused with ERROR LIMIT_REACHED.
    public static let maxRoomMembers = 1000
}

/// The control requests with a budget of their own (`RelayLimits.budgets`).
public enum ControlRequestKind: String, Sendable, CaseIterable, Hashable {
    /// KEYS_FETCH.
    case keyFetch = "key-fetch"
    /// KEYS_PUBLISH.
    case keyPublish = "key-publish"
    /// ROOM_JOIN and ROOM_LEAVE (a join creates a room that does not exist).
    case roomJoin = "room-join"
    /// ROOM_MEMBERS (the reference client asks before each post).
    case roomMembers = "room-members"
    /// WHO.
    case who
    /// READ markers (stored for an offline sender).
    case read
    /// Logins (CONNECT accepted) of one user: each registers a device's session.
    case login

    /// Requests per second per connection, and the burst (10 seconds' worth unless said).
    public var defaultBudget: RateLimit {
        switch self {
        case .keyFetch: return RateLimit(perSecond: 20, burst: 200)
        case .keyPublish: return RateLimit(perSecond: 1, burst: 10)
        case .roomJoin: return RateLimit(perSecond: 5, burst: 50)
        case .roomMembers: return RateLimit(perSecond: 50, burst: 500)
        case .who: return RateLimit(perSecond: 10, burst: 100)
        case .read: return RateLimit(perSecond: 50, burst: 500)
        case .login: return RateLimit(perSecond: 2, burst: 20)
        }
    }

    public static let defaultBudgets = Dictionary(uniqueKeysWithValues: allCases.map { ($0, $0.defaultBudget) })

    /// The request kind a control frame of `kind` spends, if it has a budget.
    init?(_ kind: SIMPMessage.Kind) {
        switch kind {
        case .keysFetch: self = .keyFetch
        case .keysPublish: self = .keyPublish
        case .roomJoin, .roomLeave: self = .roomJoin
        case .roomMembers: self = .roomMembers
        case .who: self = .who
        case .read: self = .read
        default: return nil
        }
    }
}
