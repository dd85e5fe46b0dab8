import NIOCore

/// The receiving side's requests for a file the relay may hold (docs/PROTOCOL.md §5.7),
/// sans-I/O: a device told of a file asks the relay for the first `window` chunks it lacks
/// (FILE_FETCH), and asks for the next ones once those arrived, or again after `timeout`. The
/// relay's FILE_ACK FILE_NOT_HELD ends it (the file comes from its sender, live). The chunks
/// themselves go to the transfer's `FileReceiver`, as from a sender.
public struct HeldFileFetcher: Sendable {
    /// Tunables.
    public struct Configuration: Sendable {
        /// Chunks asked for at once (the relay answers at most `RelayCore.maxChunksPerFetch`).
        public var window: UInt64 = 128
        /// Chunks asked for that have not all arrived after this are asked for again.
        public var timeout: TimeAmount = .milliseconds(300)
        public init() {}
    }

    public let fileId: UInt64
    /// The file's sender (the relay holds its files under its name).
    public let sender: String
    public let chunkCount: UInt64
    public let configuration: Configuration
    /// The relay said it holds no such file: nothing more is asked.
    public private(set) var notHeld = false
    /// FILE_FETCH requests made.
    public private(set) var requests = 0
    private var asked = ChunkRanges()
    private var askedAt: NIODeadline?

    /// Requests for the file `offer` announces.
    public init(offer: FileReceiver.Offer, configuration: Configuration = Configuration()) {
        self.fileId = offer.fileId
        self.sender = offer.sender
        self.chunkCount = offer.chunkCount
        self.configuration = configuration
    }

    /// The FILE_FETCH to send now, given the chunks `received` so far: none while the chunks
    /// asked for are still coming (within the timeout), when the file is whole, or when the
    /// relay does not hold it.
    public mutating func poll(received: ChunkRanges, now: NIODeadline) -> SIMPMessage? {
        guard !notHeld, !received.covers(chunkCount) else { return nil }
        if let askedAt, now < askedAt + configuration.timeout, !Self.holds(received, every: asked) { return nil }
        var wanted: [Range<UInt64>] = []
        var count: UInt64 = 0
        for gap in received.missing(below: chunkCount) where count < configuration.window {
            let take = min(UInt64(gap.count), configuration.window - count)
            wanted.append(gap.lowerBound..<(gap.lowerBound + take))
            count += take
        }
        asked = ChunkRanges(wanted)
        askedAt = now
        requests += 1
        return .fileFetch(fileId, ranges: asked, from: sender)
    }

    /// When `poll` should be called again if no chunk arrives (nil: never).
    public var nextDeadline: NIODeadline? { notHeld ? nil : askedAt.map { $0 + configuration.timeout } }

    /// A FILE_ACK from the relay arrived for this file: FILE_NOT_HELD ends the requests.
    /// Returns whether it was the relay's answer to them.
    @discardableResult
    public mutating func answered(_ ack: SIMPMessage) -> Bool {
        guard ack.kind == .fileAck, ack.fileId == fileId, ack.fileHeld, ack.errorCode == .fileNotHeld else { return false }
        notHeld = true
        return true
    }

    /// Whether the relay served this file (it held it): when the file is whole, `release()` tells it so.
    public var servedByRelay: Bool { requests > 0 && !notHeld }

    /// The FILE_FETCH saying this device has the whole file (the relay may delete its copy).
    public func release() -> SIMPMessage { .fileFetch(fileId, done: true, from: sender) }

    /// Whether `received` holds every chunk of `asked`.
    private static func holds(_ received: ChunkRanges, every asked: ChunkRanges) -> Bool {
        guard let top = asked.ranges.last?.upperBound else { return true }
        return received.missing(below: top).allSatisfy { gap in !asked.ranges.contains { $0.overlaps(gap) } }
    }
}
