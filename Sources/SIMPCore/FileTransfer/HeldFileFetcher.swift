import NIOCore

/// The receiving side's requests for a file the relay may hold (docs/PROTOCOL.md §5.7),
/// sans-I/O: a device told of a file asks the relay for the first `window` chunks it lacks
/// (FILE_FETCH), and asks for the next ones once those arrived, or again after `timeout`. The
/// relay's FILE_ACK FILE_NOT_HELD quiets it: the file comes from its sender, live, or its
/// sender has not begun to upload it (a receiver with another device offline reads the
/// announcement before the first chunk is stored), so it asks again after a wait that doubles
/// with each such answer (up to `longestWait`), and as usual again once a chunk came from the
/// relay, or at once when the relay says it now holds the file whole for this user (its sender
/// granted it after uploading it for another receiver). While chunks come from the sender itself (`fileSeq` above 0: the transfer is live,
/// to this device alone) and none from the relay, nothing is asked of the relay, which holds
/// nothing then: a live transfer costs at most the one request made on the announcement. Once
/// the sender's chunks stop for `liveSilence`, requests go on as before. The chunks themselves
/// go to the transfer's `FileReceiver`, as from a sender.
public struct HeldFileFetcher: Sendable {
    /// Tunables.
    public struct Configuration: Sendable {
        /// Chunks asked for at once (the relay answers at most `RelayCore.maxChunksPerFetch`).
        public var window: UInt64 = 128
        /// Chunks asked for that have not all arrived after this are asked for again.
        public var timeout: TimeAmount = .milliseconds(300)
        /// The longest wait after FILE_NOT_HELD before asking again.
        public var longestWait: TimeAmount = .seconds(30)
        /// A chunk from the sender itself within this long means the transfer is live: the
        /// relay is not asked.
        public var liveSilence: TimeAmount = .seconds(1)
        public init() {}
    }

    public let fileId: UInt64
    /// The file's sender (the relay holds its files under its name).
    public let sender: String
    public let chunkCount: UInt64
    public let configuration: Configuration
    /// The relay said it holds no such file (its last answer): asked again only after a wait.
    public private(set) var notHeld = false
    /// FILE_NOT_HELD answers since a chunk last came from the relay (each doubles the wait).
    public private(set) var notHeldAnswers = 0
    /// FILE_FETCH requests made.
    public private(set) var requests = 0
    /// Whether a chunk came from the relay (`fileSeq` 0): it holds the file, and is told when
    /// this device has it whole.
    public private(set) var servedByRelay = false
    private var asked = ChunkRanges()
    private var askedAt: NIODeadline?
    /// When the last chunk came from the sender itself (`fileSeq` above 0).
    private var lastLiveChunk: NIODeadline?

    /// Requests for the file `offer` announces.
    public init(offer: FileReceiver.Offer, configuration: Configuration = Configuration()) {
        self.fileId = offer.fileId
        self.sender = offer.sender
        self.chunkCount = offer.chunkCount
        self.configuration = configuration
    }

    /// The FILE_FETCH to send now, given the chunks `received` so far: none while the chunks
    /// asked for are still coming (within the timeout), when the file is whole, or during the
    /// wait after the relay said it does not hold the file, or while the file comes live.
    public mutating func poll(received: ChunkRanges, now: NIODeadline) -> SIMPMessage? {
        guard !received.covers(chunkCount), !isLive(now: now) else { return nil }
        if let deadline = nextDeadline, now < deadline, notHeld || !Self.holds(received, every: asked) { return nil }
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

    /// When `poll` should be called again if no chunk arrives (nil: nothing asked yet, and
    /// nothing came live): while the file comes live, not before the sender's chunks could
    /// have stopped for `liveSilence`.
    public var nextDeadline: NIODeadline? {
        let asking = askedAt.map { $0 + wait }
        guard !servedByRelay, let last = lastLiveChunk else { return asking }
        return max(asking ?? .uptimeNanoseconds(0), last + configuration.liveSilence)
    }

    /// Whether chunks come from the sender itself (within `liveSilence`) and none from the relay.
    public func isLive(now: NIODeadline) -> Bool {
        guard !servedByRelay, let last = lastLiveChunk else { return false }
        return now < last + configuration.liveSilence
    }

    /// How long after a request the next one may go: the timeout, or after FILE_NOT_HELD the
    /// timeout doubled per such answer, at most `longestWait`.
    private var wait: TimeAmount {
        guard notHeld else { return configuration.timeout }
        let doubled = configuration.timeout.nanoseconds << Int64(min(notHeldAnswers, 16))
        return .nanoseconds(min(doubled, configuration.longestWait.nanoseconds))
    }

    /// A FILE_ACK from the relay arrived for this file: FILE_NOT_HELD makes the next request
    /// wait; the relay's news that it now holds the file whole for this user (`fileDone`, no
    /// error: its sender granted it, docs/PROTOCOL.md §5.7) ends that wait, so the next `poll`
    /// asks at once. Returns whether it was one of those (news while no wait is on changes nothing).
    @discardableResult
    public mutating func answered(_ ack: SIMPMessage) -> Bool {
        guard ack.kind == .fileAck, ack.fileId == fileId, ack.fileHeld else { return false }
        if ack.errorCode == .none, ack.fileDone, ack.fromUser == sender {
            guard notHeld else { return false }
            notHeld = false
            notHeldAnswers = 0
            askedAt = nil
            return true
        }
        guard ack.errorCode == .fileNotHeld else { return false }
        notHeld = true
        notHeldAnswers += 1
        return true
    }

    /// A chunk of this file arrived at `now`: one from the relay (`fileSeq` 0, fetched or passed
    /// on as it was stored) says the relay holds the file, and requests go on at the usual pace;
    /// one from the sender itself says the transfer is live (no requests while it goes on).
    public mutating func chunkArrived(_ chunk: SIMPMessage, now: NIODeadline) {
        guard chunk.kind == .fileChunk, chunk.fileId == fileId else { return }
        guard chunk.fileSeq == 0 else {
            lastLiveChunk = now
            return
        }
        servedByRelay = true
        notHeld = false
        notHeldAnswers = 0
    }

    /// The FILE_FETCH saying this device has the whole file (the relay may delete its copy).
    public func release() -> SIMPMessage { .fileFetch(fileId, done: true, from: sender) }

    /// Whether `received` holds every chunk of `asked`.
    private static func holds(_ received: ChunkRanges, every asked: ChunkRanges) -> Bool {
        guard let top = asked.ranges.last?.upperBound else { return true }
        return received.missing(below: top).allSatisfy { gap in !asked.ranges.contains { $0.overlaps(gap) } }
    }
}
