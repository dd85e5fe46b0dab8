import Foundation
import NIOCore

/// The path of a file lab run: the scenario's links (the sender's access link, then the
/// receiver's) and the bottleneck in front of them on the way to the receiver.
struct FilePathSetup {
    enum Way { case forward, backward }

    var sender: AccessLink
    var receiver: AccessLink
    var bottleneck: Bottleneck

    func direction(_ way: Way, seed: UInt64, queue: EventQueue) -> FilePathDirection {
        switch way {
        case .forward:
            FilePathDirection(first: sender.up, second: receiver.down, bottleneck: bottleneck, seed: seed, stream: 1, queue: queue)
        case .backward:
            FilePathDirection(first: receiver.up, second: sender.down, bottleneck: nil, seed: seed, stream: 2, queue: queue)
        }
    }

    /// The mean round trip without a queue (TCP's handshake sample; the chat bar's "one RTT").
    var meanRoundTrip: TimeAmount {
        let ms = [sender.up, receiver.down, receiver.up, sender.down].reduce(0.0) { $0 + $1.delayMs + $1.jitterMs / 2 }
        return .nanoseconds(Int64(ms * 1e6))
    }

    /// Whether any link loses packets (random loss, bursts, blackouts or UDP throttling).
    var isLossy: Bool {
        [sender.up, receiver.down, receiver.up, sender.down].contains { link in
            link.lossPercent > 0 || link.burst != nil || !link.blackouts.isEmpty || (link.udp?.lossPercent ?? 0) > 0
        }
    }
}

/// What one transfer did (SIMP's or the TCP model's).
public struct TransferResult: Codable, Equatable, Sendable {
    /// Bytes held at the receiver (in order, for TCP) at a time, for the progress plot.
    public struct Progress: Codable, Equatable, Sendable {
        public var seconds: Double
        public var bytes: UInt64
    }

    public var fileBytes: Int
    /// When the receiver held the whole file (nil: not within the run's limit).
    public var completedAfter: TimeAmount?
    /// File bytes put on the wire, retransmissions included.
    public var payloadBytesSent: Int
    /// Bytes offered to the path towards the receiver, headers included.
    public var wireBytesSent: Int
    public var queueDrops: Int
    public var retransmissions: Int
    public var timeouts: Int
    /// The largest congestion window, in chunks or segments.
    public var largestWindow: Int
    /// Losses the window did not shrink for (SIMP's congestion controller only).
    public var lossesTolerated: Int
    public var progress: [Progress]
    /// The chat messages' send → arrival latencies (SIMP's run only).
    public var chatLatencies: [TimeAmount]

    /// Seconds to completion.
    public var seconds: Double? { completedAfter.map { Double($0.nanoseconds) / 1e9 } }
    /// File bytes per second (0 when incomplete).
    public var goodput: Double { seconds.map { Double(fileBytes) / $0 } ?? 0 }
    /// File bytes sent per file byte delivered.
    public var bytesSentPerByte: Double { Double(payloadBytesSent) / Double(max(fileBytes, 1)) }

    private enum CodingKeys: String, CodingKey {
        case fileBytes, completedAfterMs, payloadBytesSent, wireBytesSent, queueDrops, retransmissions, timeouts, largestWindow
        case lossesTolerated, progress, chatLatenciesMs
    }

    init(
        fileBytes: Int, completedAfter: TimeAmount?, payloadBytesSent: Int, wireBytesSent: Int, queueDrops: Int, retransmissions: Int,
        timeouts: Int, largestWindow: Int, lossesTolerated: Int, progress: [Progress], chatLatencies: [TimeAmount]
    ) {
        self.fileBytes = fileBytes
        self.completedAfter = completedAfter
        self.payloadBytesSent = payloadBytesSent
        self.wireBytesSent = wireBytesSent
        self.queueDrops = queueDrops
        self.retransmissions = retransmissions
        self.timeouts = timeouts
        self.largestWindow = largestWindow
        self.lossesTolerated = lossesTolerated
        self.progress = progress
        self.chatLatencies = chatLatencies
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        fileBytes = try c.decode(Int.self, forKey: .fileBytes)
        completedAfter = try c.decodeIfPresent(Double.self, forKey: .completedAfterMs).map { .nanoseconds(Int64($0 * 1e6)) }
        payloadBytesSent = try c.decode(Int.self, forKey: .payloadBytesSent)
        wireBytesSent = try c.decode(Int.self, forKey: .wireBytesSent)
        queueDrops = try c.decode(Int.self, forKey: .queueDrops)
        retransmissions = try c.decode(Int.self, forKey: .retransmissions)
        timeouts = try c.decode(Int.self, forKey: .timeouts)
        largestWindow = try c.decode(Int.self, forKey: .largestWindow)
        lossesTolerated = try c.decode(Int.self, forKey: .lossesTolerated)
        progress = try c.decode([Progress].self, forKey: .progress)
        chatLatencies = try c.decode([Double].self, forKey: .chatLatenciesMs).map { .nanoseconds(Int64($0 * 1e6)) }
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(fileBytes, forKey: .fileBytes)
        try c.encodeIfPresent(completedAfter.map { Double($0.nanoseconds) / 1e6 }, forKey: .completedAfterMs)
        try c.encode(payloadBytesSent, forKey: .payloadBytesSent)
        try c.encode(wireBytesSent, forKey: .wireBytesSent)
        try c.encode(queueDrops, forKey: .queueDrops)
        try c.encode(retransmissions, forKey: .retransmissions)
        try c.encode(timeouts, forKey: .timeouts)
        try c.encode(largestWindow, forKey: .largestWindow)
        try c.encode(lossesTolerated, forKey: .lossesTolerated)
        try c.encode(progress, forKey: .progress)
        try c.encode(chatLatencies.map { Double($0.nanoseconds) / 1e6 }, forKey: .chatLatenciesMs)
    }
}

/// A file transfer scenario in virtual time (docs/SCENARIOS.md, "File transfers"): the same
/// file over SIMP's datagram path and over the TCP model, through the same bottleneck and the
/// scenario's impaired links, with chat messages beside SIMP's transfer; and a run of the chat
/// messages alone, for their usual latency.
public enum FileLab {
    /// What to run.
    public struct Setup: Sendable {
        public var fileBytes: Int
        public var bottleneck: Bottleneck
        /// Chat messages during SIMP's transfer: one every this long.
        public var chatInterval: TimeAmount
        /// Chat messages in the run without a file.
        public var chatBaselineMessages: Int
        /// Virtual time allowed for each transfer (wall-clock time in real mode).
        public var limit: TimeAmount
        /// Real mode: the kernel TCP sender's congestion control (`cubic`, as the TCP model and
        /// Linux's default; `bbr`, `reno`: what the kernel offers).
        public var tcpCongestionControl = "cubic"
        /// Real mode: the relay as a process of its own, this `simp-server` executable
        /// (`FileLab.relayBesideThisProgram`); nil: in the lab's process, beside the clients and
        /// proxies.
        public var relayBinary: URL?

        public init(
            fileBytes: Int, bottleneck: Bottleneck = Bottleneck(megabitsPerSecond: 20, bufferMs: 100), chatIntervalMs: Double = 20,
            chatBaselineMessages: Int = 1000, limit: TimeAmount = .minutes(30)
        ) {
            self.fileBytes = fileBytes
            self.bottleneck = bottleneck
            self.chatInterval = .nanoseconds(Int64(chatIntervalMs * 1e6))
            self.chatBaselineMessages = chatBaselineMessages
            self.limit = limit
        }
    }

    /// Runs `scenario`'s links (its sender's access link to its receiver's) with `setup`.
    public static func run(_ scenario: Scenario, seed: UInt64, setup: Setup) -> FileLabReport {
        let path = FilePathSetup(sender: scenario.senderAccess, receiver: scenario.receiverAccess, bottleneck: setup.bottleneck)
        let simp = SIMPFileRun(path: path, fileBytes: setup.fileBytes, chatInterval: setup.chatInterval, seed: seed).run(limit: setup.limit)
        let tcp = TCPBulkTransfer(path: path, fileBytes: setup.fileBytes, seed: seed).run(limit: setup.limit)
        let chatAlone = SIMPFileRun(
            path: path, fileBytes: 0, chatInterval: setup.chatInterval, chatOnlyCount: setup.chatBaselineMessages, seed: seed
        ).run(limit: setup.limit)
        return FileLabReport(
            scenario: scenario.name, seed: seed, fileBytes: setup.fileBytes, bottleneck: setup.bottleneck, lossy: path.isLossy,
            roundTrip: path.meanRoundTrip, simp: simp, tcp: tcp, chatAlone: chatAlone.chatLatencies)
    }
}
