import NIOCore

/// The receiving half of SIMP's reliability: delivers each message to the application once
/// and, per conversation, in the order it was sent, and receipts a message when the
/// application has it.
///
/// Ordering: each sender stream numbers its messages to this receiver 1, 2, 3 … (`seq`) and
/// says below which seq it awaits nothing more (`floor`). A message that arrives early is held
/// until the ones before it arrive or the floor passes them, and only then released to the
/// application and receipted, so a receipt always means "the application has it"; meanwhile
/// each copy of it that arrives gets a HELD receipt (`held` set, docs/PROTOCOL.md §6.1), which
/// tells its sender it arrived without settling it. As a last resort a gap is skipped after
/// `holdLimit` (counted in `gapsSkippedByTimeout`).
public struct ReceiverCore: Sendable {
    /// Messages released to the application, and the receipts that go out for them.
    public struct Release: Equatable, Sendable {
        /// Messages now ready for the application, in order.
        public var deliver: [SIMPMessage] = []
        /// RECEIPTs to send (control channel, and the datagram copy): one per released message,
        /// its `holdMicros` covering the time from its arrival to now, one per duplicate of
        /// a message the application already has (the sender may have missed the first), and a
        /// HELD receipt (`held` set) per copy of a message held behind a gap.
        public var receipts: [SIMPMessage] = []

        public init() {}

        mutating func append(_ message: SIMPMessage, arrivedAt: NIODeadline, now: NIODeadline) {
            deliver.append(message)
            receipts.append(ReceiverCore.receipt(for: message, arrivedAt: arrivedAt, now: now))
        }

        mutating func append(_ other: Release) {
            deliver += other.deliver
            receipts += other.receipts
        }
    }

    /// What to do with one arriving content message.
    public struct Outcome: Equatable, Sendable {
        /// Messages now ready for the application and the receipts for them (for a message
        /// held back behind a gap, and a copy of one, only its HELD receipt).
        public var release: Release
        public var verdict: DedupeWindow.Verdict
        /// Messages now ready for the application, in order.
        public var deliver: [SIMPMessage] { release.deliver }
        /// RECEIPTs to send now.
        public var receipts: [SIMPMessage] { release.receipts }
    }

    private struct StreamKey: Hashable, Sendable {
        let sender: String
        let stream: UInt64
    }

    private struct Held: Sendable {
        var message: SIMPMessage
        var arrivedAt: NIODeadline
        /// When it started waiting (the hold limit counts from here).
        var since: NIODeadline
        /// Receipted on arrival (`receiptsWhenReleased` off): not again when released (with it
        /// on, only HELD receipts went out for it).
        var receipted = false
    }

    private struct OrderedStream: Sendable {
        var nextSeq: UInt64
        var held: [UInt64: Held] = [:]
        /// Seqs that will never come (see `skip`).
        var skipped: Set<UInt64> = []
        var lastActive: NIODeadline

        /// Moves past `floor`, releasing held messages below it, then everything consecutive.
        mutating func release(floor: UInt64) -> [Held] {
            var ready: [Held] = []
            if floor > nextSeq {
                for seq in held.keys.filter({ $0 < floor }).sorted() { ready.append(held.removeValue(forKey: seq)!) }
                nextSeq = floor
            }
            while true {
                if let next = held.removeValue(forKey: nextSeq) {
                    ready.append(next)
                } else if skipped.remove(nextSeq) == nil {
                    break
                }
                nextSeq += 1
            }
            if !skipped.isEmpty { skipped = skipped.filter { $0 >= nextSeq } }
            return ready
        }
    }

    public let windowSize: UInt64
    /// How long a message may wait for an earlier one before the gap is skipped.
    public let holdLimit: TimeAmount
    /// Ordered streams remembered per sender; the least recently active is forgotten first
    /// (its held messages are released).
    public let streamsPerSender: Int
    /// Whether a message held behind a gap is receipted only when released (a receipt then
    /// always means the application has the message, and a receiver that dies while holding
    /// it loses nothing; on arrival it gets a HELD receipt, so its sender's RTT estimate and
    /// fast retransmit still see it), or, off (as clients before HELD receipts), with a plain
    /// receipt at once on arrival (it then lives only in this process until released).
    public let receiptsWhenReleased: Bool
    private var dedupe: SenderDedupe
    private var streams: [StreamKey: OrderedStream] = [:]
    /// Arrivals not delivered because they were duplicates or too old.
    public private(set) var suppressed = 0
    /// Messages that arrived after their gap had been skipped (given up by the sender, or
    /// `holdLimit` passed): delivered at once, out of order, rather than lost
    /// (docs/PROTOCOL.md §6.5).
    public private(set) var deliveredLate = 0
    /// Times a gap was skipped because `holdLimit` passed.
    public private(set) var gapsSkippedByTimeout = 0
    /// Since when the hold limit is not counting (`stopHoldClock`), if it is stopped.
    public private(set) var holdClockStoppedAt: NIODeadline?

    public init(
        windowSize: UInt64 = 4096, holdLimit: TimeAmount = .seconds(30), streamsPerSender: Int = 4, receiptsWhenReleased: Bool = true
    ) {
        self.receiptsWhenReleased = receiptsWhenReleased
        self.windowSize = windowSize
        self.holdLimit = holdLimit
        self.streamsPerSender = streamsPerSender
        self.dedupe = SenderDedupe(windowSize: windowSize, streamsPerSender: max(8, streamsPerSender))
    }

    /// Messages held back behind a gap.
    public var heldCount: Int { streams.values.reduce(0) { $0 + $1.held.count } }

    /// When `poll(now:)` next has a held message to release, if ever: when the message that
    /// has waited longest reaches `holdLimit` (`poll` releases exactly those).
    public var nextDeadline: NIODeadline? {
        guard holdClockStoppedAt == nil else { return nil }
        return streams.values.flatMap { $0.held.values.map(\.since) }.min().map { $0 + holdLimit }
    }

    /// The RECEIPT for `message`, which arrived at `arrivedAt` and is receipted at `now`.
    static func receipt(for message: SIMPMessage, arrivedAt: NIODeadline, now: NIODeadline) -> SIMPMessage {
        let held = max(0, min(Int64(UInt32.max), (now - arrivedAt).nanoseconds / 1000))
        return message.receipt(holdMicros: UInt32(held))
    }

    /// The HELD receipt for `message`, which arrived at `arrivedAt` and waits behind a gap.
    static func heldReceipt(for message: SIMPMessage, arrivedAt: NIODeadline, now: NIODeadline) -> SIMPMessage {
        var receipt = receipt(for: message, arrivedAt: arrivedAt, now: now)
        receipt.held = true
        return receipt
    }

    /// Judges `message`, which arrived at `arrivedAt`; `now` is when its receipts will be sent.
    public mutating func receive(_ message: SIMPMessage, arrivedAt: NIODeadline, now: NIODeadline) -> Outcome {
        let verdict = dedupe.accept(message.messageId, from: message.fromUser, stream: message.stream)
        var outcome = Outcome(release: Release(), verdict: verdict)
        let key = StreamKey(sender: message.fromUser, stream: message.stream)
        guard verdict == .deliver else {
            suppressed += 1
            // A copy of a held message gets a HELD receipt (unless it was receipted on arrival):
            // the application does not have it yet.
            let held = streams[key]?.held[message.seq].flatMap { $0.message.messageId == message.messageId ? $0 : nil }
            let receipt = held?.receipted == false ? Self.heldReceipt : Self.receipt
            outcome.release.receipts.append(receipt(message, arrivedAt, now))
            // A copy of a message the application already has from another stream of its sender
            // (a newer process resending from the outbox) still takes a place in this stream's
            // numbering: nothing may wait for that seq.
            if held == nil, message.stream != 0, message.seq != 0 {
                if streams[key] == nil { outcome.release.append(startStream(key, firstSeq: max(1, message.floor), now: now)) }
                outcome.release.append(skip(message.seq, from: message.fromUser, stream: message.stream, now: now))
            }
            return outcome
        }
        guard message.stream != 0, message.seq != 0 else {
            outcome.release.append(message, arrivedAt: arrivedAt, now: now)
            return outcome
        }
        // A sender's floor never exceeds the seq of a message it is still sending.
        if streams[key] == nil { outcome.release = startStream(key, firstSeq: max(1, message.floor), now: now) }
        let arrival = Held(message: message, arrivedAt: arrivedAt, since: now)
        // In place (`&streams[key]!`): a copy of the stream would copy its held messages.
        let admitted = Self.admit(arrival, to: &streams[key]!, receiptsWhenReleased: receiptsWhenReleased, now: now)
        if admitted.late { deliveredLate += 1 }
        if let receipt = admitted.receiptNow { outcome.release.receipts.append(receipt) }
        let ready = admitted.ready
        outcome.release.deliver += ready.map(\.message)
        outcome.release.receipts += ready.filter { !$0.receipted }.map { Self.receipt(for: $0.message, arrivedAt: $0.arrivedAt, now: now) }
        return outcome
    }

    /// Puts `arrival` into its sender's `stream`: what that releases in order (`late`: it came
    /// after its gap was skipped, because its sender gave it up or the hold limit passed, and is
    /// released now, out of order, rather than lost: docs/PROTOCOL.md §6.5), and, if it stays
    /// held, the receipt it gets now (HELD, or a plain one with `receiptsWhenReleased` off).
    private static func admit(
        _ arrival: Held, to stream: inout OrderedStream, receiptsWhenReleased: Bool, now: NIODeadline
    ) -> (ready: [Held], late: Bool, receiptNow: SIMPMessage?) {
        let message = arrival.message
        stream.lastActive = now
        var ready = stream.release(floor: message.floor)
        if message.seq < stream.nextSeq {
            ready.append(arrival)
            return (ready, true, nil)
        }
        stream.held[message.seq] = arrival
        ready += stream.release(floor: 0)
        guard stream.held[message.seq] != nil else { return (ready, false, nil) }
        stream.held[message.seq]!.receipted = !receiptsWhenReleased
        let receipt = receiptsWhenReleased ? Self.heldReceipt : Self.receipt
        return (ready, false, receipt(message, arrival.arrivedAt, now))
    }

    /// Seq `seq` of `sender`'s `stream` will never reach this receiver (in a room: this user's
    /// own post, which the room numbers but does not send back): nothing waits for it. Returns
    /// what this releases.
    public mutating func skip(_ seq: UInt64, from sender: String, stream: UInt64, now: NIODeadline) -> Release {
        let key = StreamKey(sender: sender, stream: stream)
        guard var ordered = streams[key] else {
            let evicted = startStream(key, firstSeq: 1, now: now)
            streams[key]!.skipped.insert(seq)
            return evicted
        }
        guard seq >= ordered.nextSeq else { return Release() }
        ordered.skipped.insert(seq)
        let ready = ordered.release(floor: 0)
        streams[key] = ordered
        return Self.release(ready, now: now)
    }

    /// Releases every message that waited `holdLimit` or longer for a gap, skipping the gaps
    /// before it (and so releasing the held messages below it, however long they waited).
    /// Afterwards no held message is due: `nextDeadline` is later than `now` or nil.
    public mutating func poll(now: NIODeadline) -> Release {
        guard holdClockStoppedAt == nil else { return Release() }
        var ready: [Held] = []
        for key in Array(streams.keys) {
            let due = streams[key]!.held.filter { $0.value.since + holdLimit <= now }.map(\.key).max()
            guard let due else { continue }
            gapsSkippedByTimeout += 1
            ready += streams[key]!.release(floor: due)
        }
        return Self.release(ready, now: now)
    }

    private static func release(_ ready: [Held], now: NIODeadline) -> Release {
        var release = Release()
        release.deliver = ready.map(\.message)
        release.receipts = ready.filter { !$0.receipted }.map { receipt(for: $0.message, arrivedAt: $0.arrivedAt, now: now) }
        return release
    }

    /// The receiver cannot be reached since `since` (its control connection is gone): no gap can
    /// be repaired meanwhile, so the time does not count towards the hold limit (docs/PROTOCOL.md
    /// §6.5). Nothing is released by the hold limit until `restartHoldClock`.
    public mutating func stopHoldClock(since: NIODeadline) {
        if holdClockStoppedAt == nil { holdClockStoppedAt = since }
    }

    /// The receiver is reachable again (registered): held messages wait as long as they had
    /// waited when the clock stopped (one that arrived meanwhile, from now).
    public mutating func restartHoldClock(now: NIODeadline) {
        guard let stopped = holdClockStoppedAt else { return }
        holdClockStoppedAt = nil
        for key in Array(streams.keys) {
            for seq in Array(streams[key]!.held.keys) {
                let since = streams[key]!.held[seq]!.since
                streams[key]!.held[seq]!.since = since < stopped ? since + (now - stopped) : now
            }
        }
    }

    /// Starts remembering `key`; a sender's stalest stream beyond `streamsPerSender` is
    /// forgotten, and what it held is released (late rather than lost).
    private mutating func startStream(_ key: StreamKey, firstSeq: UInt64, now: NIODeadline) -> Release {
        var evicted: [Held] = []
        let ofSender = streams.filter { $0.key.sender == key.sender }
        if ofSender.count >= streamsPerSender, let stalest = ofSender.min(by: { $0.value.lastActive < $1.value.lastActive }) {
            evicted = stalest.value.held.sorted { $0.key < $1.key }.map(\.value)
            streams[stalest.key] = nil
        }
        streams[key] = OrderedStream(nextSeq: firstSeq, lastActive: now)
        return Self.release(evicted, now: now)
    }
}
