import DequeModule

/// Receipts a client owes the relay until the relay has certainly read them.
///
/// A receipt means the application has the message, so it must not vanish with a dead control
/// connection: one written to a connection is kept until a PONG answers a PING written after
/// it (TCP delivers in order, and the relay answers a PING after handling what came before),
/// and one that could not be written (no connection: a held message released while
/// reconnecting) waits. After the next login all of them are sent again; the sender ignores
/// receipts for messages it no longer waits for.
struct ReceiptLedger: Sendable {
    /// The most receipts kept (the oldest are dropped beyond it).
    static let capacity = 8192
    /// Receipts written, with the id of the first PING written after them.
    private var unconfirmed: Deque<(ping: UInt64, receipt: SIMPMessage)> = []
    private var unsent: Deque<SIMPMessage> = []

    /// Receipts not yet confirmed or sent.
    var count: Int { unconfirmed.count + unsent.count }

    /// `receipt` was written to the control connection before PING `ping` (the next one).
    mutating func written(_ receipt: SIMPMessage, beforePing ping: UInt64) {
        unconfirmed.append((ping, receipt))
        trim()
    }

    /// `receipt` could not be written (no control connection).
    mutating func couldNotWrite(_ receipt: SIMPMessage) {
        unsent.append(receipt)
        trim()
    }

    /// The relay answered PING `ping`: every receipt written before it arrived.
    mutating func pongArrived(_ ping: UInt64) {
        while let first = unconfirmed.first, first.ping <= ping { unconfirmed.removeFirst() }
    }

    /// The control connection is gone: what it did not confirm is owed again.
    mutating func connectionLost() {
        unsent = Deque(unconfirmed.map(\.receipt)) + unsent
        unconfirmed.removeAll()
        trim()
    }

    /// The receipts to send on a new connection (they become unconfirmed there).
    mutating func takeOwed() -> [SIMPMessage] {
        defer { unsent.removeAll() }
        return Array(unsent)
    }

    /// Forgets the receipts `isWithdrawn` picks: their messages were not taken after all.
    mutating func withdraw(where isWithdrawn: (SIMPMessage) -> Bool) {
        unconfirmed.removeAll { isWithdrawn($0.receipt) }
        unsent.removeAll(where: isWithdrawn)
    }

    private mutating func trim() {
        while count > Self.capacity {
            if unsent.isEmpty { unconfirmed.removeFirst() } else { unsent.removeFirst() }
        }
    }
}
