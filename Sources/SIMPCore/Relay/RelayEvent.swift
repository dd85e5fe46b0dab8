/// Something that happened in the relay which the shell reports (logs, metrics, statistics)
/// but need not act on: the core says it when it happens (`RelayAction.event`), so no shell has
/// to infer it from the store requests and answers going by.
public enum RelayEvent: Equatable, Sendable {
    /// A session of `registration`'s user became connected: the store holds its registration
    /// and CONNECTED went out. One per session (a user may have several, one per device).
    case userConnected(Registration)
    /// A session that had become connected ended, and why. Each `userConnected` is followed by
    /// exactly one of these (a session that never became connected, such as one whose
    /// registration the store refused, has neither).
    case userDisconnected(Registration, SessionEndReason)
    /// A message is durably in `user`'s inbox: the store answered that it holds it, and its
    /// sender may be told STORED (the core sends that receipt after this event, never before).
    /// Said once per message: a copy the store already held is not stored again.
    case inboxStored(InboxStored)
}

/// What `RelayEvent.inboxStored` names: whose inbox, which message of whom.
public struct InboxStored: Equatable, Sendable {
    /// The receiver whose inbox holds the message.
    public var user: String
    /// The message's sender (`#room` for a member's copy of a room post).
    public var from: String
    public var messageId: UInt64
    public var kind: SIMPMessage.Kind

    public init(user: String, from: String, messageId: UInt64, kind: SIMPMessage.Kind) {
        self.user = user
        self.from = from
        self.messageId = messageId
        self.kind = kind
    }
}

/// Why a connected session ended (`RelayEvent.userDisconnected`).
public enum SessionEndReason: String, Sendable, CaseIterable {
    /// Its control connection closed (the client went away, or the network did).
    case connectionClosed = "connection_closed"
    /// Its client said DISCONNECT.
    case disconnected
    /// Its client went silent past the heartbeat's limit.
    case silent
    /// Its access token ran out and no new one came.
    case tokenExpired = "token_expired"
    /// A newer session of the same device took over on this relay.
    case replaced
    /// A newer session of the same device took over on another relay.
    case replacedElsewhere = "replaced_elsewhere"
    /// The relay's operator ended it (`simp-server sessions end`).
    case endedByOperator = "ended_by_operator"
    /// The relay stopped.
    case relayStopped = "relay_stopped"
}
