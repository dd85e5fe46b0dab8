import NIOCore
import SIMPCore

/// One direction of a simulated TCP connection carrying SIMP control frames (receipts among
/// them, as the bytes the relay's and the client's framing wrote) over an impaired link,
/// recovering from loss as Linux does by default (SACK, RACK loss detection, retransmission
/// timeout); `docs/SCENARIOS.md` describes the model:
///
/// - every frame is one segment, sent at once (TCP_NODELAY; the congestion window is not modelled);
/// - the receiver hands frames up strictly in order, so a lost segment holds back every later
///   one (head-of-line blocking); it acknowledges every segment at once over the reverse link
///   with the cumulative ACK, the segments it holds beyond it (SACK) and the send time of the
///   segment that triggered the ACK (timestamps);
/// - RACK: a segment is lost once a segment sent after it was delivered and more than
///   RTT + min RTT/4 passed since it was sent; it is retransmitted then;
/// - otherwise the retransmission timer fires: RTO = SRTT + max(4·RTTVAR, 200 ms), doubled on
///   each consecutive expiry, at most 120 s; every outstanding segment is resent.
///
/// Thousands of segments can be outstanding at once (datagrams carried over the control
/// connection through a blackout), so the bookkeeping costs O(1) per segment and ACK, not
/// O(outstanding): an ACK names its SACK set as a prefix of the receiver's out-of-order arrival
/// log (the sender applies only what it has not seen), and loss detection walks the segments
/// in the order they were last sent, stopping at the first one not yet lost.
final class SimTCPStream {
    static let minimumRTO = TimeAmount.milliseconds(200)
    static let maximumRTO = TimeAmount.seconds(120)

    private struct Segment {
        var bytes: ByteBuffer
        var lastSent: TimeAmount
        var sacked = false
        /// The position of its latest transmission in `sendOrder`.
        var sendTicket = 0
    }

    private struct Ack {
        var cumulative: Int
        /// The SACK set: of the receiver's first `sackedArrivals` out-of-order arrivals
        /// (`outOfOrderLog`), those at or above `cumulative` (all of them still held).
        var sackedArrivals: Int
        var echo: TimeAmount
    }

    private let forward: SimLink
    private let reverse: SimLink
    private let queue: EventQueue
    private let deliver: (ByteBuffer) -> Void
    private(set) var isOpen = true

    // Sending side.
    private var nextSequence = 0
    private var oldestUnacked = 0
    private var unacked: [Int: Segment] = [:]
    private var rtt: RTTEstimator
    private var minimumRTT: TimeAmount
    private var backoffs = 0
    private var timerGeneration = 0
    /// Every transmission's sequence number, oldest first (so by `lastSent`), at the position
    /// that is its segment's `sendTicket`; an entry is stale once its segment was acknowledged,
    /// SACKed or sent again.
    private var sendOrder = SlidingLog<Int>()
    /// How many of the receiver's out-of-order arrivals the SACKs applied so far reported.
    private var sackedArrivalsApplied = 0
    /// Segments sent again by this stream.
    private(set) var retransmissions = 0
    /// Entries the sender's bookkeeping visited (SACK entries applied, segments examined for
    /// loss): grows with the traffic, not with traffic × segments outstanding.
    private(set) var bookkeepingSteps = 0

    // Receiving side.
    private var expected = 0
    private var outOfOrder: [Int: ByteBuffer] = [:]
    /// The sequence numbers `outOfOrder` took, in the order they arrived (each once).
    private var outOfOrderLog = SlidingLog<Int>()

    init(forward: SimLink, reverse: SimLink, queue: EventQueue, deliver: @escaping (ByteBuffer) -> Void) {
        self.forward = forward
        self.reverse = reverse
        self.queue = queue
        self.deliver = deliver
        // The handshake gave the first RTT sample.
        let handshake = forward.meanDelay + reverse.meanDelay
        rtt = RTTEstimator(initialRTO: .seconds(1), minimumRTO: .zero, maximumRTO: Self.maximumRTO)
        rtt.addSample(handshake)
        minimumRTT = handshake
    }

    /// Sends one write (a frame) as one segment.
    func send(_ bytes: ByteBuffer) {
        guard isOpen else { return }
        let sequence = nextSequence
        nextSequence += 1
        unacked[sequence] = Segment(bytes: bytes, lastSent: queue.now)
        transmit(sequence)
        if unacked.count == 1 { armTimer() }
    }

    /// Stops the stream: nothing more is sent or delivered.
    func close() {
        isOpen = false
        unacked.removeAll()
        outOfOrder.removeAll()
        sendOrder = SlidingLog()
        outOfOrderLog = SlidingLog()
    }

    private var rto: TimeAmount {
        let base = rtt.smoothedRTT! + max(.nanoseconds(4 * rtt.rttVariance.nanoseconds), Self.minimumRTO)
        return .nanoseconds(min(base.nanoseconds << min(backoffs, 20), Self.maximumRTO.nanoseconds))
    }

    private func transmit(_ sequence: Int) {
        guard let segment = unacked[sequence] else { return }
        unacked[sequence]!.sendTicket = sendOrder.append(sequence)
        let sentAt = queue.now
        forward.sendSegment { [self] in segmentArrived(sequence, segment.bytes, sentAt: sentAt) }
    }

    private func retransmit(_ sequence: Int) {
        guard unacked[sequence] != nil else { return }
        unacked[sequence]!.lastSent = queue.now
        retransmissions += 1
        transmit(sequence)
    }

    private func armTimer() {
        timerGeneration += 1
        guard !unacked.isEmpty else { return }
        let generation = timerGeneration
        queue.schedule(after: rto) { [self] in
            guard isOpen, generation == timerGeneration, !unacked.isEmpty else { return }
            backoffs += 1
            for sequence in outstanding() { retransmit(sequence) }
            armTimer()
        }
    }

    /// Unacknowledged, unSACKed segments in sequence order.
    private func outstanding() -> [Int] {
        (oldestUnacked..<nextSequence).filter { unacked[$0].map { !$0.sacked } ?? false }
    }

    // MARK: Receiving side

    private func segmentArrived(_ sequence: Int, _ bytes: ByteBuffer, sentAt: TimeAmount) {
        guard isOpen else { return }
        if sequence == expected {
            expected += 1
            deliver(bytes)
            while isOpen, let next = outOfOrder.removeValue(forKey: expected) {
                expected += 1
                deliver(next)
            }
        } else if sequence > expected, outOfOrder.updateValue(bytes, forKey: sequence) == nil {
            outOfOrderLog.append(sequence)
        }
        let ack = Ack(cumulative: expected, sackedArrivals: outOfOrderLog.end, echo: sentAt)
        reverse.sendSegment { [self] in ackArrived(ack) }
    }

    // MARK: Sending side

    private func ackArrived(_ ack: Ack) {
        guard isOpen else { return }
        var newestDelivered: TimeAmount?
        func delivered(_ sequence: Int) {
            guard let segment = unacked[sequence], !segment.sacked else { return }
            newestDelivered = max(newestDelivered ?? segment.lastSent, segment.lastSent)
        }
        if ack.cumulative > oldestUnacked {
            for sequence in oldestUnacked..<ack.cumulative {
                delivered(sequence)
                unacked[sequence] = nil
            }
            oldestUnacked = ack.cumulative
            backoffs = 0
        }
        // Arrivals that an ACK applied earlier reported are SACKed already (or acknowledged).
        for index in sackedArrivalsApplied..<max(ack.sackedArrivals, sackedArrivalsApplied) {
            bookkeepingSteps += 1
            let sequence = outOfOrderLog[index]
            guard sequence >= oldestUnacked else { continue }
            delivered(sequence)
            unacked[sequence]?.sacked = true
        }
        sackedArrivalsApplied = max(ack.sackedArrivals, sackedArrivalsApplied)
        outOfOrderLog.dropFirst(upTo: sackedArrivalsApplied)
        guard let newest = newestDelivered else { return }
        let sample = queue.now - ack.echo
        rtt.addSample(sample)
        minimumRTT = min(minimumRTT, sample)
        detectLosses(newestDelivered: newest)
        armTimer()
    }

    /// RACK: segments sent before one that was delivered, and outstanding for longer than an
    /// RTT plus the reordering window, are lost (resent in sequence order); the others are
    /// checked again when they could be. Both conditions hold for the segments sent first, so
    /// the walk in send order stops at the first segment they miss.
    private func detectLosses(newestDelivered: TimeAmount) {
        let window = rtt.smoothedRTT! + .nanoseconds(minimumRTT.nanoseconds / 4)
        var lost: [Int] = []
        var recheck: TimeAmount?
        while let sequence = oldestOutstandingTransmission() {
            let sent = unacked[sequence]!.lastSent
            guard sent < newestDelivered else { break }
            guard queue.now >= sent + window else {
                recheck = sent + window
                break
            }
            lost.append(sequence)
            sendOrder.dropFirst(upTo: sendOrder.start + 1)
        }
        for sequence in lost.sorted() { retransmit(sequence) }
        if let recheck {
            queue.schedule(at: recheck) { [self] in
                guard isOpen else { return }
                detectLosses(newestDelivered: newestDelivered)
            }
        }
    }

    /// The outstanding segment sent longest ago, once the stale transmissions before it are dropped.
    private func oldestOutstandingTransmission() -> Int? {
        while sendOrder.start < sendOrder.end {
            bookkeepingSteps += 1
            let sequence = sendOrder[sendOrder.start]
            if let segment = unacked[sequence], !segment.sacked, segment.sendTicket == sendOrder.start { return sequence }
            sendOrder.dropFirst(upTo: sendOrder.start + 1)
        }
        return nil
    }
}
