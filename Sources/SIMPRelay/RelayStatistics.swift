import SIMPCore

/// Counts a relay has kept since it started.
public struct RelayStatistics: Sendable, Equatable {
    public var datagramsReceived = 0
    public var datagramsForwarded = 0
    /// Datagrams that came in DATAGRAM control frames, and went out in them (among those forwarded).
    public var datagramsCarriedIn = 0
    public var datagramsCarriedOut = 0
    public var receiptsRouted = 0
    /// Datagrams and receipts handed to other relays through the store (and heard there).
    public var deliveriesPublished = 0
    public var rejected: [RejectReason: Int] = [:]
    public var connectedUsers = 0
    /// Sessions whose datagrams go over their control connection (docs/PROTOCOL.md §5.5).
    public var sessionsOverControl = 0
    /// Messages newly stored in offline inboxes (retransmissions of stored ones not counted).
    public var inboxStored = 0
    /// Entries removed from inboxes after delivery or hand-over.
    public var inboxRemoved = 0
    /// Whether a graceful shutdown's drain is under way.
    public var draining = false
}
