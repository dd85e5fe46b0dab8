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
final class SimTCPStream {
    static let minimumRTO = TimeAmount.milliseconds(200)
    static let maximumRTO = TimeAmount.seconds(120)

    private struct Segment {
        var bytes: ByteBuffer
        var lastSent: TimeAmount
        var sacked = false
    }

    private struct Ack {
        var cumulative: Int
        var sacked: [Int]
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
    /// Segments sent again by this stream.
    private(set) var retransmissions = 0

    // Receiving side.
    private var expected = 0
    private var outOfOrder: [Int: ByteBuffer] = [:]

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
    }

    private var rto: TimeAmount {
        let base = rtt.smoothedRTT! + max(.nanoseconds(4 * rtt.rttVariance.nanoseconds), Self.minimumRTO)
        return .nanoseconds(min(base.nanoseconds << min(backoffs, 20), Self.maximumRTO.nanoseconds))
    }

    private func transmit(_ sequence: Int) {
        guard let segment = unacked[sequence] else { return }
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
        } else if sequence > expected {
            outOfOrder[sequence] = bytes
        }
        let ack = Ack(cumulative: expected, sacked: outOfOrder.keys.sorted(), echo: sentAt)
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
        for sequence in ack.sacked where sequence >= oldestUnacked {
            delivered(sequence)
            unacked[sequence]?.sacked = true
        }
        guard let newest = newestDelivered else { return }
        let sample = queue.now - ack.echo
        rtt.addSample(sample)
        minimumRTT = min(minimumRTT, sample)
        detectLosses(newestDelivered: newest)
        armTimer()
    }

    /// RACK: segments sent before one that was delivered, and outstanding for longer than an
    /// RTT plus the reordering window, are lost; the others are checked again when they could be.
    private func detectLosses(newestDelivered: TimeAmount) {
        let window = rtt.smoothedRTT! + .nanoseconds(minimumRTT.nanoseconds / 4)
        var recheck: TimeAmount?
        for sequence in outstanding() {
            let sent = unacked[sequence]!.lastSent
            guard sent < newestDelivered else { continue }
            if queue.now >= sent + window {
                retransmit(sequence)
            } else {
                recheck = min(recheck ?? sent + window, sent + window)
            }
        }
        if let recheck {
            queue.schedule(at: recheck) { [self] in
                guard isOpen else { return }
                detectLosses(newestDelivered: newestDelivered)
            }
        }
    }
}
