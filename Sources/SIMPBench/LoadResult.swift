import NIOCore

/// What one measurement window produced, before the report adds relay figures.
public struct LoadResult: Sendable {
    public var targetRate: Double
    public var seconds: Double
    public var offered = 0
    /// Messages due in the window that were not offered because their pair's window was full.
    public var skipped = 0
    public var delivered = 0
    public var receipts = 0
    /// Receipt frames the receivers wrote (a batch counts once).
    public var receiptFrames = 0
    /// Datagram copies of those receipts the receivers sent (docs/PROTOCOL.md §6.1).
    public var receiptDatagrams = 0
    /// Receipt datagrams that reached a sender (the copy that came second included).
    public var receiptDatagramsArrived = 0
    /// Receipts (messages) settled by a receipt datagram because it came before the TCP copy.
    public var receiptsFirstByDatagram = 0
    public var failed = 0
    /// Messages offered in the window still without receipt or failure when the bench stopped.
    public var unresolved = 0
    /// Messages handed to the receiving application more than once (should be 0).
    public var duplicates = 0
    /// Duplicate datagram arrivals the receiver suppressed (retransmissions that crossed receipts).
    public var suppressed = 0
    public var retransmits = 0
    /// The longest the generator ran behind its schedule (the bench itself being slow).
    public var generatorMaxLag: TimeAmount = .zero
    public var latency = LatencyRecorder()
    public var receiptRTT = LatencyRecorder()
    /// The senders' smoothed RTT at the end, averaged over pairs.
    public var smoothedRTT: TimeAmount?

    public init(targetRate: Double, seconds: Double) {
        self.targetRate = targetRate
        self.seconds = seconds
    }

    /// One result for the parts' common window (the load generators of one run, each with
    /// its own pairs): rates and counts add up, the histograms hold every part's samples,
    /// the generator lag is the worst part's, and the smoothed RTT is the parts' average.
    public static func merged(_ parts: [LoadResult]) -> LoadResult {
        var total = LoadResult(targetRate: 0, seconds: parts.map(\.seconds).max() ?? 0)
        for part in parts {
            total.targetRate += part.targetRate
            total.offered += part.offered
            total.skipped += part.skipped
            total.delivered += part.delivered
            total.receipts += part.receipts
            total.receiptFrames += part.receiptFrames
            total.receiptDatagrams += part.receiptDatagrams
            total.receiptDatagramsArrived += part.receiptDatagramsArrived
            total.receiptsFirstByDatagram += part.receiptsFirstByDatagram
            total.failed += part.failed
            total.unresolved += part.unresolved
            total.duplicates += part.duplicates
            total.suppressed += part.suppressed
            total.retransmits += part.retransmits
            total.generatorMaxLag = max(total.generatorMaxLag, part.generatorMaxLag)
            total.latency.add(part.latency)
            total.receiptRTT.add(part.receiptRTT)
        }
        total.smoothedRTT = mean(parts.compactMap(\.smoothedRTT))
        return total
    }

    /// The average of `amounts`; nil for none.
    static func mean(_ amounts: [TimeAmount]) -> TimeAmount? {
        amounts.isEmpty ? nil : .nanoseconds(amounts.reduce(0) { $0 + $1.nanoseconds } / Int64(amounts.count))
    }
}
