import NIOCore
import SIMPCore

/// The same file sent over one TCP connection through the same path, in virtual time: the lab's
/// TCP model (SACK, RACK, the retransmission timeout with Linux's 200 ms floor, as
/// `SimTCPStream`, plus a tail loss probe: with data outstanding and no ACK for two round
/// trips, the newest segment goes again, once, so that a lost tail is found by RACK rather
/// than the timeout) with what a bulk transfer needs on top: a congestion window, CUBIC as Linux
/// runs it by default (`CubicWindow` with `.everyLoss`: every loss event shrinks it; HyStart ends
/// slow start on rising round trips; no delay-based reduction) and no pacing.
///
/// Segments carry `segmentBytes` of the file (1,500-byte packets). The receiver acknowledges
/// every segment at once with the cumulative ACK, the segment that triggered it and up to three
/// more out-of-order segments it holds (SACK blocks), and echoes the send time (timestamps).
/// A lost ACK's SACK information is lost with it; the next cumulative ACK covers what it can.
final class TCPBulkTransfer {
    static let segmentBytes = 1448
    static let headerBytes = 52

    private struct Ack {
        var cumulative: Int
        var sacked: [Int]
        var echo: TimeAmount
        var echoNumber: UInt64
    }

    private let queue = EventQueue()
    private let forward: FilePathDirection
    private let backward: FilePathDirection
    private let fileBytes: Int
    private let segments: Int
    // Sender.
    private var congestion = CubicWindow(initialWindow: 10, minimumWindow: 1, lossResponse: .everyLoss, reducesOnDelay: false)
    private var rtt = RTTEstimator(initialRTO: .seconds(1), minimumRTO: .zero, maximumRTO: .seconds(120))
    private var minimumRTT: TimeAmount?
    private var delivered: [Bool]
    /// Each outstanding segment's latest transmission: its number and when it was sent.
    private var outstanding: [Int: (number: UInt64, sentAt: TimeAmount)] = [:]
    /// Transmissions in the order sent; an entry is stale once its segment was delivered or sent again.
    private var sendOrder: [(segment: Int, number: UInt64)] = []
    /// Entries of `sendOrder` before this one are done with.
    private var sendOrderStart = 0
    private var toResend = ChunkRanges()
    private var nextNew = 0
    private var transmissions: UInt64 = 0
    private var newestDeliveredNumber: UInt64 = 0
    private var backoffs = 0
    private var timerGeneration = 0
    private var recheckAt: TimeAmount?
    private var probeGeneration = 0
    private var probeSent = false
    private(set) var retransmissions = 0
    private(set) var timeouts = 0
    // Receiver.
    private var received: [Bool]
    private var cumulative = 0
    private var recentOutOfOrder: [Int] = []
    private var heldBytes: UInt64 = 0
    private var progress = ProgressLog()
    private var completedAt: TimeAmount?

    init(path: FilePathSetup, fileBytes: Int, seed: UInt64) {
        forward = path.direction(.forward, seed: seed, queue: queue)
        backward = path.direction(.backward, seed: seed, queue: queue)
        self.fileBytes = fileBytes
        segments = (fileBytes + Self.segmentBytes - 1) / Self.segmentBytes
        delivered = Array(repeating: false, count: segments)
        received = Array(repeating: false, count: segments)
        // The handshake's round trip is the first sample.
        let handshake = path.meanRoundTrip
        rtt.addSample(handshake)
        minimumRTT = handshake
    }

    func run(limit: TimeAmount) -> TransferResult {
        transmit()
        _ = queue.run(until: limit, stop: { [self] in completedAt != nil }, checkEvery: 100_000)
        return TransferResult(
            fileBytes: fileBytes, completedAfter: completedAt, payloadBytesSent: Int(transmissions) * Self.segmentBytes,
            wireBytesSent: forward.bytesOffered, queueDrops: forward.queueDrops, retransmissions: retransmissions, timeouts: timeouts,
            largestWindow: Int(congestion.largestWindow), lossesTolerated: 0, progress: progress.points, chatLatencies: [])
    }

    private var inFlight: Int { outstanding.count }

    private var rto: TimeAmount {
        let base = (rtt.smoothedRTT ?? .seconds(1)) + max(.nanoseconds(4 * rtt.rttVariance.nanoseconds), .milliseconds(200))
        return .nanoseconds(min(base.nanoseconds << min(backoffs, 20), TimeAmount.seconds(120).nanoseconds))
    }

    private func transmit() {
        var sentAny = false
        while inFlight < max(congestion.chunks, 1), let segment = nextSegment() {
            send(segment)
            sentAny = true
        }
        if sentAny, inFlight == 1 || timerGeneration == 0 { armTimer() }
    }

    /// Sends `segment` as a new transmission.
    private func send(_ segment: Int) {
        transmissions += 1
        outstanding[segment] = (transmissions, queue.now)
        sendOrder.append((segment, transmissions))
        let number = transmissions
        let sentAt = queue.now
        let size = min(Self.segmentBytes, fileBytes - segment * Self.segmentBytes)
        forward.send(size: size + Self.headerBytes, segment: true) { [self] in segmentArrived(segment, sentAt: sentAt, number: number) }
    }

    private func nextSegment() -> Int? {
        while let segment = toResend.popFirst().map(Int.init) {
            guard !delivered[segment], outstanding[segment] == nil else { continue }
            retransmissions += 1
            return segment
        }
        while nextNew < segments {
            defer { nextNew += 1 }
            if !delivered[nextNew] { return nextNew }
        }
        return nil
    }

    private func armTimer() {
        timerGeneration += 1
        armProbe()
        guard !outstanding.isEmpty else { return }
        let generation = timerGeneration
        queue.schedule(after: rto) { [self] in
            guard generation == timerGeneration, !outstanding.isEmpty, completedAt == nil else { return }
            // Everything outstanding is lost; the window starts again from one segment.
            backoffs += 1
            timeouts += 1
            congestion.persistentCongestion(newestSent: transmissions)
            for segment in outstanding.keys { toResend.insert(UInt64(segment)) }
            outstanding.removeAll()
            sendOrder.removeAll()
            sendOrderStart = 0
            transmit()
            armTimer()
        }
    }

    /// The tail loss probe (RFC 8985 §7): two round trips without an ACK send the newest
    /// outstanding segment again, once until an ACK acknowledges something.
    private func armProbe() {
        probeGeneration += 1
        guard !outstanding.isEmpty, !probeSent, let srtt = rtt.smoothedRTT else { return }
        let generation = probeGeneration
        let timeout = max(TimeAmount.nanoseconds(2 * srtt.nanoseconds), TimeAmount.milliseconds(10))
        guard timeout < rto else { return }
        queue.schedule(after: timeout) { [self] in
            guard generation == probeGeneration, completedAt == nil,
                let newest = outstanding.max(by: { $0.value.number < $1.value.number })
            else { return }
            probeSent = true
            retransmissions += 1
            send(newest.key)
        }
    }

    // MARK: Receiver

    private func segmentArrived(_ segment: Int, sentAt: TimeAmount, number: UInt64) {
        if !received[segment] {
            received[segment] = true
            heldBytes += UInt64(min(Self.segmentBytes, fileBytes - segment * Self.segmentBytes))
            if segment != cumulative { recentOutOfOrder = Array(([segment] + recentOutOfOrder).prefix(4)) }
            while cumulative < segments, received[cumulative] { cumulative += 1 }
            recentOutOfOrder.removeAll { $0 < cumulative }
            // In-order bytes are what the application has: progress counts only those.
            let inOrder = UInt64(min(cumulative * Self.segmentBytes, fileBytes))
            progress.record(held: inOrder, at: queue.now, total: UInt64(fileBytes))
            if cumulative == segments, completedAt == nil { completedAt = queue.now }
        }
        let ack = Ack(cumulative: cumulative, sacked: [segment] + recentOutOfOrder, echo: sentAt, echoNumber: number)
        backward.send(size: Self.headerBytes, segment: true) { [self] in ackArrived(ack) }
    }

    // MARK: Sender

    private func ackArrived(_ ack: Ack) {
        var count = 0
        var newestSentAt: TimeAmount?
        func deliver(_ segment: Int) {
            guard segment < segments, !delivered[segment] else { return }
            delivered[segment] = true
            count += 1
            if let entry = outstanding.removeValue(forKey: segment) {
                newestSentAt = max(newestSentAt ?? entry.sentAt, entry.sentAt)
                newestDeliveredNumber = max(newestDeliveredNumber, entry.number)
            }
        }
        for segment in ack.sacked { deliver(segment) }
        while let first = firstUndelivered, first < ack.cumulative { deliver(first) }
        guard count > 0 else { return }
        backoffs = 0
        probeSent = false
        let sample = queue.now - ack.echo
        rtt.addSample(sample)
        minimumRTT = min(minimumRTT ?? sample, sample)
        congestion.roundTripMeasured(sample, newest: ack.echoNumber, newestSent: transmissions, now: queue.deadline)
        congestion.acknowledged(count: count, newest: newestDeliveredNumber, rtt: rtt.smoothedRTT ?? sample, now: queue.deadline)
        if let newestSentAt { detectLosses(newestDeliveredSentAt: newestSentAt) }
        transmit()
        armTimer()
    }

    private var lowestUndelivered = 0
    private var firstUndelivered: Int? {
        while lowestUndelivered < segments, delivered[lowestUndelivered] { lowestUndelivered += 1 }
        return lowestUndelivered < segments ? lowestUndelivered : nil
    }

    /// RACK: a segment sent before one that was delivered, outstanding for more than SRTT +
    /// min RTT / 4, is lost; the walk in send order stops at the first that is not yet.
    private func detectLosses(newestDeliveredSentAt newest: TimeAmount) {
        let window = (rtt.smoothedRTT ?? .zero) + .nanoseconds((minimumRTT ?? .zero).nanoseconds / 4)
        while sendOrderStart < sendOrder.count {
            let oldest = sendOrder[sendOrderStart]
            guard let entry = outstanding[oldest.segment], entry.number == oldest.number else {
                sendOrderStart += 1
                continue
            }
            guard entry.sentAt < newest else { break }
            guard queue.now >= entry.sentAt + window else {
                scheduleRecheck(at: entry.sentAt + window, newest: newest)
                break
            }
            sendOrderStart += 1
            outstanding[oldest.segment] = nil
            toResend.insert(UInt64(oldest.segment))
            congestion.lost(number: entry.number, newestSent: transmissions, now: queue.deadline)
        }
    }

    private func scheduleRecheck(at time: TimeAmount, newest: TimeAmount) {
        if let recheckAt, recheckAt <= time, recheckAt >= queue.now { return }
        recheckAt = time
        queue.schedule(at: time) { [self] in
            guard recheckAt == time else { return }
            recheckAt = nil
            detectLosses(newestDeliveredSentAt: newest)
            transmit()
        }
    }
}
