import DequeModule
import NIOCore

/// The bookkeeping `ReliableSender` keeps per message in flight, per timer and per conversation.
extension ReliableSender {
    /// A message in flight: its transmissions and what receipts said about them.
    struct Pending: Sendable {
        var message: SIMPMessage
        var sentAt: [NIODeadline] = []
        /// Receipts for later-sent messages to the same receiver since the latest transmission.
        var overtaken = 0
        /// `keepsSenderSequence` (the relay delivering stored messages): the floor is the lowest
        /// seq of the same (stream, receiver) still pending here, or the floor the message was
        /// stored with if that is lower (its original sender may still be sending an earlier
        /// message directly).
        var computesFloor = false
        /// The floor the message came with (nil: none, as for room copies).
        var originalFloor: UInt64?
        /// The receiver holds it behind a gap (a HELD receipt came, docs/PROTOCOL.md §6.1): it
        /// arrived, so it is no longer rushed, only sent again every `maximumRTO` in one copy
        /// (the receiver may restart and lose it) until its final receipt or its give-up time.
        var isHeld = false
        /// The latest transmission a receipt answered (0: none): a receipt for it or an earlier
        /// one (the final receipt after a HELD one) gives no second RTT sample or overtaking.
        var answered = 0
        /// When the message's live timer fires (older timers of the same attempt are stale).
        var timerDeadline: NIODeadline?
        var attempts: Int { sentAt.count }

        /// Notes a transmission at `now` and returns the message as it goes out.
        mutating func recordTransmission(at now: NIODeadline, floor: UInt64?, custodyFloor: UInt64?, timerDeadline: NIODeadline) -> SIMPMessage {
            sentAt.append(now)
            overtaken = 0
            message.attempt = UInt32(attempts)
            if let floor { message.floor = floor }
            if let custodyFloor { message.custodyFloor = custodyFloor }
            self.timerDeadline = timerDeadline
            return message
        }
    }

    /// A retransmission deadline of one attempt of a message (stale once the message moved on).
    struct Timer: Comparable, Sendable {
        let deadline: NIODeadline
        let messageId: UInt64
        let attempt: Int
        static func < (a: Timer, b: Timer) -> Bool { a.deadline < b.deadline }
    }

    /// Sequence state of one (stream, receiver) conversation.
    struct Conversation: Sendable {
        var nextSeq: UInt64 = 1
        /// Unresolved seqs in send order; resolved ones are dropped lazily from the front.
        var unresolved: Deque<UInt64> = []
        var resolved: Set<UInt64> = []
        /// Unresolved seqs the receiver holds behind a gap (HELD receipt), with their ids.
        var held: [UInt64: UInt64] = [:]
        /// Unresolved seqs a relay took into custody (STORED receipt).
        var stored: Set<UInt64> = []
        /// Where the last `custodyFloor()` stopped: every seq from `floor()` up to it is resolved
        /// or stored (it only grows: a seq never leaves both).
        var custodyScan: UInt64 = 1

        /// The lowest seq not yet receipted or given up (or the next seq when none is open).
        mutating func floor() -> UInt64 {
            while let first = unresolved.first, resolved.remove(first) != nil { unresolved.removeFirst() }
            return unresolved.first ?? nextSeq
        }

        /// The lowest seq neither resolved nor stored: this sender is still sending it (or will).
        mutating func custodyFloor() -> UInt64 {
            var seq = max(custodyScan, floor())
            while seq < nextSeq, resolved.contains(seq) || stored.contains(seq) { seq += 1 }
            custodyScan = seq
            return seq
        }
    }
}
