import DequeModule
import NIOCore

/// The sending side of one file transfer, sans-I/O (docs/PROTOCOL.md §5.6): which chunk goes
/// out when. Chunks are paced by a `CubicWindow`; the receiver's FILE_ACKs (selective ranges of
/// chunk indices) retire them; a chunk is declared lost once a later transmission was
/// acknowledged and a round trip plus four times its variation (at least 9/8 of a round trip)
/// has passed since it was sent, as TCP's RACK does, and then sent again. Time, not a count of
/// later acknowledgements: a jittery link (radio, KCP's test link) reorders chunks all the
/// time, and counting would send a large share of them twice. Nothing acknowledged for a
/// retransmission timeout sends one
/// probe (the oldest chunk in flight again) and backs the timer off, as QUIC's probe timeout
/// does: what else is in flight is declared lost only once an acknowledgement of a later
/// transmission says so, so a late acknowledgement never costs a window sent twice. A second
/// timeout in a row is persistent congestion.
///
/// A sender started again after its own restart (`resuming`) sends nothing until the receiver
/// said what it holds (its FILE_ACK answering the announcement sent again), or one probe per
/// timeout meanwhile; the receiver's numbers from the earlier run are stepped over.
///
/// Each transmission has its own number (`fileSeq`, from 1), which the receiver echoes as the
/// highest it has seen: round trips are measured without ambiguity, retransmissions included.
/// The shell reads the chunk, seals it (`FileChunkCipher`) and sends what `poll` returns; the
/// core never reads the file.
public struct FileSender: Sendable {
    /// One chunk to send now: its index and transmission number.
    public struct Transmission: Equatable, Sendable {
        public var chunk: UInt64
        public var number: UInt64
    }

    /// Tunables of the sender.
    public struct Configuration: Sendable {
        /// The round trip assumed before the first measurement.
        public var initialRTT: TimeAmount = .milliseconds(50)
        /// The longest the receiver holds an acknowledgement back (its `ackDelay`), added to timeouts.
        public var maxAckDelay: TimeAmount = .milliseconds(10)
        /// Nothing acknowledged for this long: the transfer has `stalled`.
        public var stallAfter: TimeAmount = .seconds(60)
        public init() {}
    }

    private struct Sent: Sendable {
        var number: UInt64
        var chunk: UInt64
        var sentAt: NIODeadline
        /// Sent again after it was declared lost (not the first copy, not a timeout's probe).
        var resent = false
    }

    public let fileId: UInt64
    /// How many chunks the file has.
    public let chunkCount: UInt64
    public let configuration: Configuration
    /// The chunks the receiver has said it holds.
    public private(set) var acknowledged = ChunkRanges()
    /// A sender started again (`resuming`): how many chunks the receiver held from the earlier
    /// run, as its first answer said. Not this run's work: a rate counts only what is above it.
    public private(set) var chunksHeldBefore: UInt64 = 0
    public private(set) var congestion: CubicWindow
    public private(set) var rtt: RTTEstimator
    /// Whether the receiver said it has the whole file and its digest matched.
    public private(set) var isDone = false
    /// Whether the whole file is held by the relay for an offline receiver (its FILE_ACK said
    /// `fileHeld` and `fileDone`), rather than received by the receiver.
    public internal(set) var heldByRelay = false
    /// The receiver's refusal (FILE_REFUSED), if any: the transfer is over.
    public private(set) var refusal: String?
    /// Transmissions so far, first sends and retransmissions.
    public private(set) var transmissions: UInt64 = 0
    /// Transmissions of chunks sent before.
    public private(set) var retransmissions: UInt64 = 0
    /// Chunks declared lost by later acknowledgements.
    public private(set) var lossesDetected: UInt64 = 0
    /// Retransmission timeouts (each sent one probe).
    public private(set) var timeouts: UInt64 = 0
    /// Chunks declared lost and sent again whose first copy reached the receiver after all
    /// (the acknowledgement covering them echoed a number below the copy sent again).
    public private(set) var spuriousRetransmissions: UInt64 = 0
    /// How much later than a round trip a chunk may arrive before it is declared lost, grown by
    /// each spurious retransmission (at most once a round trip, up to a round trip), as RACK's
    /// reordering window grows on a D-SACK: a link that reorders more than its round-trip
    /// variation shows is learnt, instead of sending a share of the file twice.
    public private(set) var reorderingAllowance: TimeAmount = .zero
    private var allowanceGrownAt: NIODeadline?
    private var inFlight: Deque<Sent> = []
    private var toResend = ChunkRanges()
    private var nextNew: UInt64 = 0
    private var newestAcknowledged: UInt64 = 0
    private var lastProgress: NIODeadline
    private var timeoutsInARow = 0
    private var nextSend: NIODeadline
    private var lastTransmission: NIODeadline
    private var receiver: (device: String, instance: UInt64)?
    /// When the last timeout fired (the next one is measured from it), nil after progress.
    private var lastTimeout: NIODeadline?
    /// A resumed sender waits for the receiver's first acknowledgement before sending a window.
    private var waitingForReceiver: Bool

    /// A sender of `chunkCount` chunks of file `fileId`, starting at `now`; `resuming` when the
    /// receiver may hold some of them already (this sender was started again).
    public init(
        fileId: UInt64, chunkCount: UInt64, configuration: Configuration = Configuration(), resuming: Bool = false, now: NIODeadline
    ) {
        self.waitingForReceiver = resuming
        self.fileId = fileId
        self.chunkCount = chunkCount
        self.configuration = configuration
        self.congestion = CubicWindow()
        self.rtt = RTTEstimator(initialRTO: configuration.initialRTT * 3, minimumRTO: .milliseconds(50), maximumRTO: .seconds(5))
        self.lastProgress = now
        self.nextSend = now
        self.lastTransmission = now
    }

    /// The number of chunks of `size` bytes cut into `chunkSize`-byte chunks (the last may be shorter).
    public static func chunkCount(size: UInt64, chunkSize: Int) -> UInt64 {
        (size + UInt64(chunkSize) - 1) / UInt64(chunkSize)
    }

    /// Whether the receiver holds every chunk (it may still be checking the digest).
    public var hasEverything: Bool { acknowledged.covers(chunkCount) }

    /// Transmissions not yet acknowledged or declared lost.
    public var chunksInFlight: Int { inFlight.count }

    /// Whether nothing was acknowledged for `configuration.stallAfter`.
    public func stalled(now: NIODeadline) -> Bool { !isDone && now - lastProgress >= configuration.stallAfter }

    /// The chunks to send now, in order. Call at `nextDeadline`, after each acknowledgement, and
    /// whenever the shell can write again.
    public mutating func poll(now: NIODeadline) -> [Transmission] {
        guard !isDone, refusal == nil else { return [] }
        detectLosses(now: now)
        var out: [Transmission] = []
        if let deadline = timeoutDeadline, now >= deadline, let probe = timedOut(now: now) { out.append(probe) }
        let interval = congestion.pacingInterval(rtt: smoothedRTT)
        let burst = max(10, congestion.chunks / 4)
        // Unused pacing credit is kept for at most `burst` chunks.
        let earliest = now - .nanoseconds(interval.nanoseconds * Int64(burst))
        if nextSend < earliest { nextSend = earliest }
        while !waitingForReceiver, inFlight.count < congestion.chunks, nextSend <= now, let (chunk, resent) = nextChunk() {
            transmissions += 1
            inFlight.append(Sent(number: transmissions, chunk: chunk, sentAt: now, resent: resent))
            out.append(Transmission(chunk: chunk, number: transmissions))
            nextSend = nextSend + interval
        }
        if let probe = probeDue(now: now) { out.append(probe) }
        if !out.isEmpty { lastTransmission = now }
        return out
    }

    /// The receiver holds every chunk but has not said the digest matched: its last
    /// acknowledgement may have been lost. After a timeout the last chunk goes again, which the
    /// receiver answers with its `fileDone` (or refusal) again.
    private mutating func probeDue(now: NIODeadline) -> Transmission? {
        guard inFlight.isEmpty, hasEverything, chunkCount > 0, now >= lastTransmission + timeout else { return nil }
        transmissions += 1
        retransmissions += 1
        timeoutsInARow += 1
        inFlight.append(Sent(number: transmissions, chunk: chunkCount - 1, sentAt: now))
        return Transmission(chunk: chunkCount - 1, number: transmissions)
    }

    /// When `poll` should be called next (nil: only when an acknowledgement arrives).
    public var nextDeadline: NIODeadline? {
        guard !isDone, refusal == nil else { return nil }
        var deadline = timeoutDeadline
        if !waitingForReceiver, inFlight.count < congestion.chunks, hasChunkToSend { deadline = min(deadline ?? nextSend, nextSend) }
        if inFlight.isEmpty, hasEverything, chunkCount > 0 { deadline = lastTransmission + timeout }
        if let oldest = inFlight.first, oldest.number < newestAcknowledged {
            deadline = min(deadline ?? oldest.sentAt + lossDelay, oldest.sentAt + lossDelay) // when it will be declared lost
        }
        return deadline
    }

    /// A FILE_ACK arrived: `ranges` are the chunks the receiving device `device` holds,
    /// `newestNumber` the highest transmission number it has seen, `delay` how long it held
    /// the acknowledgement, `instance` the receiver's instance (a new one after a restart: its
    /// ranges replace what was acknowledged before, since a receiver killed may have lost what
    /// it had not saved), `done` that it has the whole file and the digest matched.
    public mutating func acknowledgement(
        _ ranges: ChunkRanges, newestNumber: UInt64, delay: TimeAmount, device: String, instance: UInt64, done: Bool, now: NIODeadline
    ) {
        if let receiver, receiver.device != device { return } // one device takes a transfer
        var newestNumber = newestNumber
        if newestNumber > transmissions {
            // Numbers this sender never used: the receiver saw them from this sender's earlier
            // run. Number from above them, and take nothing from this one for timing or loss.
            transmissions = newestNumber
            newestNumber = 0
        }
        let firstAnswerToAResume = waitingForReceiver
        waitingForReceiver = false
        if let receiver, receiver.instance != instance {
            acknowledged = ranges // a restarted receiver: resend whatever it lacks
            toResend = ChunkRanges(acknowledged.missing(below: nextNew))
            inFlight.removeAll()
            newestAcknowledged = 0
        }
        receiver = (device, instance)
        let before = acknowledged.count
        for range in ranges.ranges { acknowledged.insert(range) }
        if firstAnswerToAResume { chunksHeldBefore = acknowledged.count }
        var newlyAcknowledged = 0
        var newest: Sent?
        var spurious = false
        inFlight.removeAll { sent in
            guard acknowledged.contains(sent.chunk) else { return false }
            newlyAcknowledged += 1
            if sent.number == newestNumber { newest = sent }
            // The receiver had not seen this copy yet it holds the chunk: the first copy arrived.
            if sent.resent, newestNumber > 0, sent.number > newestNumber { spurious = true }
            return true
        }
        if spurious { retransmittedSpuriously(now: now) }
        if let newest, newestNumber > newestAcknowledged {
            let sample = max(now - newest.sentAt - delay, .microseconds(50))
            rtt.addSample(sample)
            congestion.roundTripMeasured(sample, newest: newestNumber, newestSent: transmissions, now: now)
        }
        newestAcknowledged = max(newestAcknowledged, newestNumber)
        if acknowledged.count > before || done {
            lastProgress = now
            timeoutsInARow = 0
            lastTimeout = nil
        }
        congestion.acknowledged(count: newlyAcknowledged, newest: newestNumber, rtt: smoothedRTT, now: now)
        detectLosses(now: now)
        if done { isDone = true }
    }

    /// The receiver refused the file (FILE_REFUSED: too large, disk full, digest mismatch).
    public mutating func refused(_ reason: String) { refusal = reason }

    private var smoothedRTT: TimeAmount { rtt.smoothedRTT ?? configuration.initialRTT }

    /// The retransmission timeout, doubled for each timeout in a row, with the receiver's
    /// acknowledgement delay on top; never before a chunk overtaken would be declared lost
    /// (`lossDelay`), so a reordering allowance learnt does not turn losses into timeouts.
    private var timeout: TimeAmount {
        let attempt = timeoutsInARow + 1
        let afterLossDelay = lossDelay.nanoseconds << min(timeoutsInARow, 20)
        return max(rtt.timeout(forAttempt: attempt), .nanoseconds(min(afterLossDelay, rtt.maximumRTO.nanoseconds))) + configuration.maxAckDelay
    }

    /// When the retransmission timer fires: a timeout after the oldest transmission in flight
    /// (or the last timeout), or, for a resumed sender still waiting, after its start.
    private var timeoutDeadline: NIODeadline? {
        if let oldest = inFlight.first { return max(oldest.sentAt, lastTimeout ?? oldest.sentAt) + timeout }
        if waitingForReceiver { return (lastTimeout ?? lastProgress) + timeout }
        return nil
    }

    private var hasChunkToSend: Bool { !toResend.isEmpty || nextNew < chunkCount }

    /// The next chunk to send, and whether it is sent again after a loss.
    private mutating func nextChunk() -> (UInt64, Bool)? {
        while let chunk = toResend.popFirst() {
            guard !acknowledged.contains(chunk) else { continue }
            retransmissions += 1
            return (chunk, true)
        }
        while nextNew < chunkCount {
            defer { nextNew += 1 }
            if !acknowledged.contains(nextNew) { return (nextNew, false) }
        }
        return nil
    }

    /// How long after its transmission a chunk that a later transmission overtook is lost: a
    /// round trip and four times its variation, at least 9/8 of a round trip, or the reordering
    /// allowance learnt when larger.
    private var lossDelay: TimeAmount {
        let variation = max(4 * rtt.rttVariance.nanoseconds, smoothedRTT.nanoseconds / 8, reorderingAllowance.nanoseconds)
        return max(smoothedRTT + .nanoseconds(variation), .microseconds(500))
    }

    /// A chunk was sent again for nothing: the next loss waits an eighth of a round trip longer
    /// (once per round trip, so one late flight counts once; at most half a round trip in all:
    /// a chunk not yet declared lost holds its place in the window).
    private mutating func retransmittedSpuriously(now: NIODeadline) {
        spuriousRetransmissions += 1
        if let allowanceGrownAt, now - allowanceGrownAt < smoothedRTT { return }
        allowanceGrownAt = now
        let current = max(4 * rtt.rttVariance.nanoseconds, smoothedRTT.nanoseconds / 8, reorderingAllowance.nanoseconds)
        reorderingAllowance = .nanoseconds(min(current + smoothedRTT.nanoseconds / 8, smoothedRTT.nanoseconds / 2))
    }

    /// Declares lost what a later acknowledged transmission and `lossDelay` say is lost.
    private mutating func detectLosses(now: NIODeadline) {
        let lossDelay = lossDelay
        while let oldest = inFlight.first, oldest.number < newestAcknowledged {
            guard now - oldest.sentAt >= lossDelay else { break }
            inFlight.removeFirst()
            guard !acknowledged.contains(oldest.chunk) else { continue }
            toResend.insert(oldest.chunk)
            lossesDetected += 1
            congestion.lost(number: oldest.number, newestSent: transmissions, now: now)
        }
    }

    /// Nothing acknowledged for a timeout: one probe goes (the oldest chunk in flight again, or
    /// the first the receiver lacks when nothing is), the rest stays in flight until a later
    /// acknowledgement declares it lost.
    private mutating func timedOut(now: NIODeadline) -> Transmission? {
        inFlight.removeAll { acknowledged.contains($0.chunk) } // its acknowledgement was lost: nothing to resend
        // One timeout is a loss; a second in a row is persistent congestion (not while a resumed
        // sender waits for the receiver: nothing was sent).
        switch (waitingForReceiver, timeoutsInARow) {
        case (true, _): break
        case (false, 0): congestion.lost(number: transmissions, newestSent: transmissions, now: now)
        default: congestion.persistentCongestion(newestSent: transmissions)
        }
        timeoutsInARow += 1
        timeouts += 1
        lastTimeout = now
        guard let chunk = inFlight.first?.chunk ?? acknowledged.missing(below: chunkCount).first?.lowerBound else { return nil }
        transmissions += 1
        retransmissions += 1
        inFlight.append(Sent(number: transmissions, chunk: chunk, sentAt: now))
        return Transmission(chunk: chunk, number: transmissions)
    }
}
