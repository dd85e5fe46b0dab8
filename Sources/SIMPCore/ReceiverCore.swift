import NIOCore

/// The receiving half of SIMP's reliability: receipts every content datagram and delivers each
/// message to the application once and, per conversation, in the order it was sent.
///
/// Ordering: each sender stream numbers its messages to this receiver 1, 2, 3 … (`seq`) and
/// says below which seq it awaits nothing more (`floor`). A message that arrives early is
/// receipted at once but held until the ones before it arrive or the floor passes them. As a
/// last resort a gap is skipped after `holdLimit` (counted in `gapsSkippedByTimeout`).
public struct ReceiverCore: Sendable {
    /// What to do with one arriving content message.
    public struct Outcome: Equatable, Sendable {
        /// Messages now ready for the application, in order (empty for duplicates and for a
        /// message held back behind a gap).
        public var deliver: [SIMPMessage]
        /// Send this RECEIPT over the control channel (always, so the sender stops retrying).
        public var receipt: SIMPMessage
        public var verdict: DedupeWindow.Verdict
    }

    private struct StreamKey: Hashable, Sendable {
        let sender: String
        let stream: UInt64
    }

    private struct OrderedStream: Sendable {
        var nextSeq: UInt64
        var held: [UInt64: (message: SIMPMessage, since: NIODeadline)] = [:]
        /// Seqs that will never come (see `skip`).
        var skipped: Set<UInt64> = []
        var lastActive: NIODeadline

        /// Moves past `floor`, releasing held messages below it, then everything consecutive.
        mutating func release(floor: UInt64) -> [SIMPMessage] {
            var ready: [SIMPMessage] = []
            if floor > nextSeq {
                for seq in held.keys.filter({ $0 < floor }).sorted() { ready.append(held.removeValue(forKey: seq)!.message) }
                nextSeq = floor
            }
            while true {
                if let next = held.removeValue(forKey: nextSeq) {
                    ready.append(next.message)
                } else if skipped.remove(nextSeq) == nil {
                    break
                }
                nextSeq += 1
            }
            skipped = skipped.filter { $0 >= nextSeq }
            return ready
        }
    }

    public let windowSize: UInt64
    /// How long a message may wait for an earlier one before the gap is skipped.
    public let holdLimit: TimeAmount
    /// Ordered streams remembered per sender; the least recently active is forgotten first.
    public let streamsPerSender: Int
    private var windows: [String: DedupeWindow] = [:]
    private var streams: [StreamKey: OrderedStream] = [:]
    /// Arrivals not delivered because they were duplicates or too old.
    public private(set) var suppressed = 0
    /// Messages delivered after later ones of their conversation, because their gap had been
    /// skipped (given up by the sender, or `holdLimit` passed). Delivered anyway: never lost.
    public private(set) var deliveredOutOfOrder = 0
    /// Gaps skipped because `holdLimit` passed.
    public private(set) var gapsSkippedByTimeout = 0

    public init(windowSize: UInt64 = 4096, holdLimit: TimeAmount = .seconds(30), streamsPerSender: Int = 4) {
        self.windowSize = windowSize
        self.holdLimit = holdLimit
        self.streamsPerSender = streamsPerSender
    }

    /// Messages held back behind a gap.
    public var heldCount: Int { streams.values.reduce(0) { $0 + $1.held.count } }

    /// When `poll(now:)` next has a held message to release, if ever.
    public var nextDeadline: NIODeadline? {
        streams.values.flatMap { $0.held.values.map(\.since) }.min().map { $0 + holdLimit }
    }

    /// Judges `message`, which arrived at `arrivedAt`; `now` is when the receipt will be sent.
    public mutating func receive(_ message: SIMPMessage, arrivedAt: NIODeadline, now: NIODeadline) -> Outcome {
        let verdict = windows[message.fromUser, default: DedupeWindow(size: windowSize)].accept(message.messageId)
        let held = max(0, min(Int64(UInt32.max), (now - arrivedAt).nanoseconds / 1000))
        var outcome = Outcome(deliver: [], receipt: message.receipt(holdMicros: UInt32(held)), verdict: verdict)
        guard verdict == .deliver else {
            suppressed += 1
            return outcome
        }
        guard message.stream != 0, message.seq != 0 else {
            outcome.deliver = [message]
            return outcome
        }
        let key = StreamKey(sender: message.fromUser, stream: message.stream)
        // A sender's floor never exceeds the seq of a message it is still sending.
        if streams[key] == nil { startStream(key, firstSeq: max(1, message.floor), now: now) }
        var stream = streams[key]!
        stream.lastActive = now
        var ready = stream.release(floor: message.floor)
        if message.seq < stream.nextSeq {
            deliveredOutOfOrder += 1
            ready.append(message)
        } else {
            stream.held[message.seq] = (message, now)
            ready += stream.release(floor: 0)
        }
        streams[key] = stream
        outcome.deliver = ready
        return outcome
    }

    /// Seq `seq` of `sender`'s `stream` will never reach this receiver (in a room: this user's
    /// own post, which the room numbers but does not send back): nothing waits for it. Returns
    /// the messages this releases.
    public mutating func skip(_ seq: UInt64, from sender: String, stream: UInt64, now: NIODeadline) -> [SIMPMessage] {
        let key = StreamKey(sender: sender, stream: stream)
        guard var ordered = streams[key] else {
            startStream(key, firstSeq: 1, now: now)
            streams[key]!.skipped.insert(seq)
            return []
        }
        guard seq >= ordered.nextSeq else { return [] }
        ordered.skipped.insert(seq)
        let ready = ordered.release(floor: 0)
        streams[key] = ordered
        return ready
    }

    /// Releases messages that waited longer than `holdLimit` for a gap, skipping the gap.
    public mutating func poll(now: NIODeadline) -> [SIMPMessage] {
        var ready: [SIMPMessage] = []
        for key in Array(streams.keys) {
            while let oldest = streams[key]!.held.min(by: { $0.key < $1.key }), oldest.value.since + holdLimit <= now {
                gapsSkippedByTimeout += 1
                ready += streams[key]!.release(floor: oldest.key)
            }
        }
        return ready
    }

    private mutating func startStream(_ key: StreamKey, firstSeq: UInt64, now: NIODeadline) {
        let ofSender = streams.filter { $0.key.sender == key.sender }
        if ofSender.count >= streamsPerSender, let stalest = ofSender.min(by: { $0.value.lastActive < $1.value.lastActive }) {
            streams[stalest.key] = nil
        }
        streams[key] = OrderedStream(nextSeq: firstSeq, lastActive: now)
    }
}
