import NIOCore

/// Identifies one control (TCP) connection on a relay.
public struct ConnectionID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    public var description: String { "c\(rawValue)" }

    /// The hash a dictionary asks for, as its `UInt64`'s: the same value the synthesized
    /// `hash(into:)` gives (so tables keep their order), through the integer's one-shot hash
    /// rather than a `Hasher` built, fed and finalized per lookup (about 70 instructions fewer;
    /// two lookups per forwarded datagram).
    public func _rawHashValue(seed: Int) -> Int { rawValue._rawHashValue(seed: seed) }
}

/// A user's registration as the relay knows it.
public struct Route: Equatable, Sendable {
    public var address: SocketAddress
    /// The relay holding the user's session.
    public var relayId: String
    public init(address: SocketAddress, relayId: String) {
        self.address = address
        self.relayId = relayId
    }
}

/// A live session's entry in the store: who, where, and the token that owns the entry (only
/// the session that wrote a registration may refresh or remove it).
public struct Registration: Equatable, Sendable {
    public var user: String
    public var route: Route
    public var session: String
    /// The session's device ("" for the user's default device).
    public var device: String
    /// False for a send-only session (docs/PROTOCOL.md §4.7): it is not a route for content.
    public var receives: Bool
    /// Whether the session's datagrams go in DATAGRAM frames on its control connection rather
    /// than over UDP (docs/PROTOCOL.md §5.5); shown to operators (`simp-server sessions`).
    public var overControl: Bool
    public init(user: String, route: Route, session: String, device: String = "", receives: Bool = true, overControl: Bool = false) {
        self.user = user
        self.route = route
        self.session = session
        self.device = device
        self.receives = receives
        self.overControl = overControl
    }
}

/// Something the relay's shell must do. Every decision of the relay reaches the outside world
/// as one of these; the shell only carries them out.
///
/// The two large payloads (a message, a store request: about 500 bytes) are boxed (`indirect`),
/// so an action is about 50 bytes: a forwarded datagram's `.deliver` is copied into and out of
/// the action list without moving a control message's worth of memory.
public enum RelayAction: Equatable, Sendable {
    /// Send a control message on a connection.
    indirect case send(ConnectionID, SIMPMessage)
    /// Send a control message that is already encoded (its protobuf bytes, without the frame
    /// header) on a connection, as one frame: a receipt the relay routes without re-encoding.
    case forward(ConnectionID, ByteBuffer)
    /// Send a datagram, sealed for `user`'s session, to the user's registered `address`: the
    /// only way a datagram for a user leaves the relay.
    case deliver(user: String, ByteBuffer, to: SocketAddress)
    /// Send the relay's own sealed datagram (the answer to a HELLO) to `address`.
    case reply(ByteBuffer, to: SocketAddress)
    /// Send a sealed datagram in a DATAGRAM frame on a control connection, for a session whose
    /// datagrams do not go over UDP (docs/PROTOCOL.md §5.5): a forward, a receipt's copy, an
    /// inbox delivery or a HELLO answer.
    case carry(ConnectionID, ByteBuffer)
    /// Close a connection (after sending what was queued).
    case close(ConnectionID)
    /// Stop reading a connection: it has as many requests waiting for the store as it may
    /// (TCP backpressure then slows its client).
    case pauseReading(ConnectionID)
    /// Read a connection stopped by `pauseReading` again.
    case resumeReading(ConnectionID)
    /// Count and log rejected input.
    case reject(RejectReason, detail: String)
    /// Ask the store; its answer comes back through `RelayCore.storeAnswered`.
    indirect case store(StoreRequest)
    /// A graceful shutdown's drain is over: the shell may call `RelayCore.shutDown`.
    case drained
    /// Report what happened (a session connected or ended, a message stored): the shell logs
    /// and counts it; nothing else depends on it.
    indirect case event(RelayEvent)
}

/// Why the relay dropped or refused input; each reason has its own counter.
public enum RejectReason: String, Sendable, CaseIterable {
    case malformed, unexpectedKind = "unexpected_kind", missingField = "missing_field"
    case unsupportedVersion = "unsupported_version", unknownRecipient = "unknown_recipient"
    case notConnected = "not_connected", alreadyConnected = "already_connected"
    case lookupBacklogFull = "lookup_backlog_full", registryUnavailable = "registry_unavailable"
    case receiptUnroutable = "receipt_unroutable"
    case frameTooLarge = "frame_too_large", datagramTooLarge = "datagram_too_large"
    case heartbeatTimeout = "heartbeat_timeout", recipientOffline = "recipient_offline"
    /// A datagram arrived while the relay was shutting down.
    case draining
    /// Login: wrong password or unknown user; CONNECT without login on a relay that requires it.
    case authFailed = "auth_failed", authRequired = "auth_required"
    /// Access tokens: refused (key, signature, claims, revoked), not taken here (no key set,
    /// plain TCP from afar), a session ended because its token ran out.
    case tokenRefused = "token_refused", tokenNotAccepted = "token_not_accepted", tokenSessionExpired = "token_session_expired"
    /// Too many connections or login attempts from one address, or messages from one user.
    case connectionRateLimited = "connection_rate_limited", loginRateLimited = "login_rate_limited"
    case messageRateLimited = "message_rate_limited"
    /// A file datagram (FILE_CHUNK, FILE_ACK) over its user's file budget (its sender's
    /// congestion control sees it as a loss).
    case fileRateLimited = "file_rate_limited"
    /// A FILE_GRANT for a file its sender has not left whole on the relay (never uploaded,
    /// another user's id, expired, released, still uploading).
    case fileNotHeld = "file_not_held"
    /// Datagrams: not sealed, sealed for no live session, MAC wrong, counter replayed.
    case unsealed, unknownSession = "unknown_session", badMAC = "bad_mac", replayed
    /// A datagram whose `fromUser` is not its session's user.
    case senderMismatch = "sender_mismatch"
    /// A delivery published for another relay reached no subscriber (that relay is gone).
    case relayUnreachable = "relay_unreachable"
    /// Another relay handed over a delivery for a user who has no session here (it moved).
    case recipientNotHere = "recipient_not_here"
    /// Bytes on this relay's delivery channel were not a valid envelope.
    case badRelayDelivery = "bad_relay_delivery"
    /// A message was not stored: the receiver's log is at its cap (its sender tries again later).
    case inboxFull = "inbox_full"
    /// A stored message was discarded: it waited longer than the inbox TTL.
    case inboxExpired = "inbox_expired"
    /// A message for an offline user (or a room post) could not be stored (its sender retransmits).
    case inboxUnavailable = "inbox_unavailable"
    /// A room post or member list request from a user who is not a member of the room.
    case notAMember = "not_a_member"
    /// A KEYS_PUBLISH whose bundle or one-time prekeys fail the checks of docs/E2E.md §3.3.
    case badKeyBundle = "bad_key_bundle"
    /// A store request other than the above failed (the store's own error is in the detail).
    case storeUnavailable = "store_unavailable"
    /// A connection did not log in within the login deadline; it is closed.
    case loginTimeout = "login_timeout"
    /// A connection over its address's (or the relay's) limit of connections not logged in.
    case unauthenticatedLimit = "unauthenticated_limit"
    /// A control request over its connection's or user's budget, or over the requests a
    /// connection may have waiting for the store.
    case requestRateLimited = "request_rate_limited"
    /// A request that would exceed a bound on kept state (rooms per user, members per room).
    case limitReached = "limit_reached"

    /// Failed logins and refused access tokens are worth an operator's attention (logged at
    /// `notice`); every other rejection is routine noise (`debug`).
    public var isWorthNotice: Bool {
        switch self {
        case .authFailed, .loginRateLimited, .tokenRefused, .tokenNotAccepted, .tokenSessionExpired: true
        default: false
        }
    }
}
